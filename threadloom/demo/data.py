"""The demo shop's data: a SQLite database the demo creates and its queries.

The tables (prefixed ``demo_``) live in the same SQLite file as the checkpoints, next to
the checkpointer's own tables, so one file holds the whole demo. They are created and
seeded from ``seed.json`` on first use; later runs keep what earlier runs changed
(a cancelled order stays cancelled).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = [
    "DemoData", "OrderNotFoundError", "OrderStateError", "demo_thread_model", "load_seed",
]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS demo_products (
    sku TEXT PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL,
    price REAL NOT NULL, stock INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS demo_orders (
    id INTEGER PRIMARY KEY, customer TEXT NOT NULL, status TEXT NOT NULL,
    created TEXT NOT NULL, cancel_reason TEXT);
CREATE TABLE IF NOT EXISTS demo_order_items (
    order_id INTEGER NOT NULL REFERENCES demo_orders(id), sku TEXT NOT NULL
    REFERENCES demo_products(sku), qty INTEGER NOT NULL, PRIMARY KEY (order_id, sku));
CREATE TABLE IF NOT EXISTS demo_rates (
    currency TEXT PRIMARY KEY, usd_per_unit REAL NOT NULL, as_of TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS demo_audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, thread_id TEXT,
    event TEXT NOT NULL, detail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS demo_threads (
    thread_id TEXT PRIMARY KEY, model TEXT NOT NULL, updated REAL NOT NULL);
"""
CANCELLABLE = ("processing",)


class OrderNotFoundError(LookupError):
    """No order has the given id."""


class OrderStateError(ValueError):
    """The order cannot change to the requested status (e.g. it already shipped)."""


def load_seed() -> dict[str, Any]:
    """The packaged seed data (``threadloom/demo/seed.json``) as a dict."""
    text = resources.files("threadloom.demo").joinpath("seed.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def demo_thread_model(path: str | Path, thread_id: str) -> str | None:
    """The model spec the demo recorded for ``thread_id`` in the file ``path``, or None
    when the demo did not start that thread (or the file has no demo tables).

    Opens the file read-only, so asking never adds the demo tables to a user's database.
    """
    uri = Path(path).resolve().as_uri() + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=30)
    except sqlite3.OperationalError:  # no such file
        return None
    try:
        row = conn.execute("SELECT model FROM demo_threads WHERE thread_id = ?",
                           (thread_id,)).fetchone()
    except sqlite3.OperationalError:  # no demo_threads table: not a demo file
        return None
    finally:
        conn.close()
    return None if row is None else str(row[0])


class DemoData:
    """Access to the demo tables in one SQLite file; each call opens a short connection.

    Args:
        path: the SQLite file, created with its tables and seed rows at the first query
            (so building an agent over it, e.g. to draw it, writes nothing).

    Raises:
        sqlite3.DatabaseError: (at the first query) the file is not a SQLite database.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._ready = False

    @contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        if not self._ready:
            self._setup()
        conn = sqlite3.connect(self.path, timeout=30)
        conn.row_factory = sqlite3.Row
        try:
            with conn:
                yield conn
        finally:
            conn.close()

    def _setup(self) -> None:
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._ready = True  # the connection below must not set up again
        try:
            with self._conn() as conn:
                self._create(conn)
        except BaseException:
            self._ready = False
            raise

    @staticmethod
    def _create(conn: sqlite3.Connection) -> None:
        """The demo tables and, in an empty file, the seed rows."""
        conn.executescript(_SCHEMA)
        if conn.execute("SELECT COUNT(*) FROM demo_products").fetchone()[0]:
            return
        seed = load_seed()
        conn.executemany(
            "INSERT INTO demo_products VALUES (:sku, :name, :category, :price, :stock)",
            seed["products"])
        conn.executemany(
            "INSERT INTO demo_rates VALUES (?, ?, ?)",
            [(c, r, seed["rates_date"]) for c, r in seed["rates_to_usd"].items()])
        for order in seed["orders"]:
            conn.execute("INSERT INTO demo_orders VALUES (?, ?, ?, ?, NULL)",
                         (order["id"], order["customer"], order["status"], order["created"]))
            conn.executemany("INSERT INTO demo_order_items VALUES (?, ?, ?)",
                             [(order["id"], sku, qty) for sku, qty in order["items"]])

    # -- queries used by the tools ---------------------------------------------------------

    def search_products(self, query: str = "", category: str | None = None,
                        max_price: float | None = None, limit: int = 5) -> list[dict[str, Any]]:
        """Products whose name, SKU or category contains every word of ``query``,
        cheapest first (prices in USD)."""
        sql = "SELECT sku, name, category, price, stock FROM demo_products WHERE 1=1"
        params: list[Any] = []
        for word in query.lower().split():
            sql += " AND (lower(name) LIKE ? OR lower(sku) LIKE ? OR lower(category) LIKE ?)"
            params += [f"%{word.rstrip('s')}%"] * 3
        if category:
            sql += " AND lower(category) = ?"
            params.append(category.lower())
        if max_price is not None:
            sql += " AND price <= ?"
            params.append(max_price)
        sql += " ORDER BY price ASC LIMIT ?"
        params.append(max(1, min(limit, 20)))
        with self._conn() as conn:
            return [dict(r) for r in conn.execute(sql, params)]

    def get_order(self, order_id: int) -> dict[str, Any]:
        """An order with its items and its total in USD (computed by SQL).

        Raises:
            OrderNotFoundError: no such order.
        """
        with self._conn() as conn:
            row = conn.execute("SELECT * FROM demo_orders WHERE id = ?", (order_id,)).fetchone()
            if row is None:
                known = [r[0] for r in conn.execute("SELECT id FROM demo_orders ORDER BY id")]
                raise OrderNotFoundError(f"no order {order_id}; known orders: {known}")
            items = [dict(r) for r in conn.execute(
                "SELECT i.sku, p.name, i.qty, p.price, ROUND(i.qty * p.price, 2) AS subtotal "
                "FROM demo_order_items i JOIN demo_products p ON p.sku = i.sku "
                "WHERE i.order_id = ? ORDER BY i.sku", (order_id,))]
        order = dict(row)
        if order.get("cancel_reason") is None:
            order.pop("cancel_reason", None)
        order["items"] = items
        order["total"] = round(sum(i["subtotal"] for i in items), 2)
        order["currency"] = "USD"
        return order

    def list_orders(self, customer: str | None = None,
                    status: str | None = None) -> list[dict[str, Any]]:
        """Orders (id, customer, status, created, total in USD), newest first."""
        sql = ("SELECT o.id, o.customer, o.status, o.created, "
               "ROUND(SUM(i.qty * p.price), 2) AS total FROM demo_orders o "
               "JOIN demo_order_items i ON i.order_id = o.id "
               "JOIN demo_products p ON p.sku = i.sku WHERE 1=1")
        params: list[Any] = []
        if customer:
            sql += " AND lower(o.customer) LIKE ?"
            params.append(f"%{customer.lower()}%")
        if status:
            sql += " AND o.status = ?"
            params.append(status)
        sql += " GROUP BY o.id ORDER BY o.created DESC"
        with self._conn() as conn:
            return [dict(r) for r in conn.execute(sql, params)]

    def rate(self, currency: str) -> tuple[float, str]:
        """``(usd_per_unit, as_of_date)`` of a currency.

        Raises:
            KeyError: unknown currency (the message lists the known ones).
        """
        with self._conn() as conn:
            row = conn.execute("SELECT usd_per_unit, as_of FROM demo_rates WHERE currency = ?",
                               (currency.upper(),)).fetchone()
            if row is None:
                known = [r[0] for r in conn.execute("SELECT currency FROM demo_rates")]
                raise KeyError(f"unknown currency {currency!r}; known: {', '.join(known)}")
        return float(row[0]), str(row[1])

    def cancel_order(self, order_id: int, reason: str) -> dict[str, Any]:
        """Set an order's status to ``cancelled`` (only ``processing`` orders).

        Raises:
            OrderNotFoundError: no such order.
            OrderStateError: the order is not in a cancellable status.
        """
        order = self.get_order(order_id)
        if order["status"] not in CANCELLABLE:
            raise OrderStateError(
                f"order {order_id} is {order['status']}; only orders still processing "
                "can be cancelled")
        with self._conn() as conn:
            conn.execute("UPDATE demo_orders SET status = 'cancelled', cancel_reason = ? "
                         "WHERE id = ? AND status = 'processing'", (reason, order_id))
        return self.get_order(order_id)

    # -- bookkeeping -----------------------------------------------------------------------

    def audit(self, thread_id: str | None, event: str, detail: dict[str, Any]) -> None:
        """Append one row to the audit log."""
        with self._conn() as conn:
            conn.execute("INSERT INTO demo_audit (at, thread_id, event, detail) "
                         "VALUES (?, ?, ?, ?)",
                         (time.time(), thread_id, event, json.dumps(detail, default=str)))

    def audit_rows(self, thread_id: str | None = None) -> list[dict[str, Any]]:
        """The audit log (of one thread, when given), oldest first."""
        sql = "SELECT * FROM demo_audit"
        params: tuple[str, ...] = ()
        if thread_id is not None:
            sql, params = sql + " WHERE thread_id = ?", (thread_id,)
        with self._conn() as conn:
            rows = [dict(r) for r in conn.execute(sql + " ORDER BY seq", params)]
        for row in rows:
            row["detail"] = json.loads(row["detail"])
        return rows

    def remember_model(self, thread_id: str, model: str) -> None:
        """Record which model spec a demo thread uses (so a resume picks the same)."""
        with self._conn() as conn:
            conn.execute("INSERT INTO demo_threads VALUES (?, ?, ?) ON CONFLICT(thread_id) "
                         "DO UPDATE SET model = excluded.model, updated = excluded.updated",
                         (thread_id, model, time.time()))

    def forget_thread(self, thread_id: str) -> None:
        """Delete what the demo recorded for a thread: its model and its audit rows."""
        with self._conn() as conn:
            conn.execute("DELETE FROM demo_threads WHERE thread_id = ?", (thread_id,))
            conn.execute("DELETE FROM demo_audit WHERE thread_id = ?", (thread_id,))

    def thread_model(self, thread_id: str) -> str | None:
        """The model spec recorded for a demo thread, or None."""
        with self._conn() as conn:
            row = conn.execute("SELECT model FROM demo_threads WHERE thread_id = ?",
                               (thread_id,)).fetchone()
        return None if row is None else str(row[0])
