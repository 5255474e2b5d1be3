"""threadloom."""
