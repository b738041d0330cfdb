"""Commerce tools: product catalogue, cart, orders and deliveries, venue bookings, payment methods.

Venue availability is a pure function of (venue, date, time), so it needs no table and a
replayed episode sees the same free slots as the original.
"""

from __future__ import annotations

import json
import zlib
from datetime import timedelta

from botpsy.world.registry import (ToolError, date_param, enum, ident, integer, money, number, parse_date, string,
                                   time_param, tool)

MAX_QUANTITY = 10
MAX_PARTY = 20
SLOT_TIMES = [f"{h:02d}:{m:02d}" for h in range(11, 22) for m in (0, 30)]


def slot_is_free(venue_id: str, date: str, time: str) -> bool:
    """About four slots in five are free; the same slot is always free or always taken."""
    if time not in SLOT_TIMES:
        return False
    return zlib.crc32(f"{venue_id}|{date}|{time}".encode()) % 5 != 0


def _product_view(row: dict, full: bool = False) -> dict:
    out = {"id": row["id"], "name": row["name"], "price": money(row["price_cents"]), "rating": row["rating"],
           "in_stock": row["stock"] > 0}
    if full:
        out.update(category=row["category"], stock=row["stock"], description=row["description"])
    return out


def _product(ctx, product_id: str) -> dict:
    return ctx.require("SELECT * FROM products WHERE id = ?", product_id, what="product")


def matches_query(query: str, row: dict) -> bool:
    """Every word of the query appears in the product's name or category."""
    text = f"{row['name']} {row['category']}".lower()
    return all(term in text for term in query.lower().split())


@tool("search_products", "Search the shop's catalogue by words in the name or category.", domain="commerce",
      writes=False, params={"query": string("what to look for", minLength=1),
                            "max_price": number("highest price", 0, 100000),
                            "sort": enum("result order", ["relevance", "price_low", "price_high", "rating"])},
      required=["query"])
def search_products(ctx, query, max_price=None, sort="relevance"):
    rows = [r for r in ctx.all("SELECT * FROM products ORDER BY id") if matches_query(query, r)]
    if max_price is not None:
        rows = [r for r in rows if r["price_cents"] <= round(max_price * 100)]
    order = {"price_low": lambda r: r["price_cents"], "price_high": lambda r: -r["price_cents"],
             "rating": lambda r: -r["rating"]}.get(sort)
    if order:
        rows.sort(key=order)
    return {"products": [_product_view(r) for r in rows[:5]]}


@tool("get_product", "Full details of one product, including its description and stock.", domain="commerce",
      writes=False, params={"product_id": ident("the product's id")})
def get_product(ctx, product_id):
    return _product_view(_product(ctx, product_id), full=True)


@tool("add_to_cart", "Put a product in the cart (adds to any quantity already there).", domain="commerce",
      params={"product_id": ident("the product's id"),
              "quantity": integer(f"how many, 1 to {MAX_QUANTITY}", 1, MAX_QUANTITY)}, required=["product_id"])
def add_to_cart(ctx, product_id, quantity=1):
    product = _product(ctx, product_id)
    row = ctx.one("SELECT quantity FROM cart_items WHERE product_id = ?", product_id)
    total = quantity + (row["quantity"] if row else 0)
    if total > MAX_QUANTITY:
        raise ToolError("too_many", f"at most {MAX_QUANTITY} of one product per cart")
    if product["stock"] < total:
        raise ToolError("out_of_stock", f"only {product['stock']} of {product['name']} in stock")
    ctx.run("INSERT OR REPLACE INTO cart_items(product_id, quantity) VALUES (?, ?)", product_id, total)
    return {"product": product["name"], "quantity": total}


@tool("remove_from_cart", "Take a product out of the cart.", domain="commerce",
      params={"product_id": ident("the product's id")})
def remove_from_cart(ctx, product_id):
    if ctx.run("DELETE FROM cart_items WHERE product_id = ?", product_id) == 0:
        raise ToolError("not_in_cart", f"{product_id} is not in the cart")
    return {"removed": product_id}


def _cart(ctx) -> tuple[list[dict], int]:
    rows = ctx.all("SELECT c.product_id, c.quantity, p.name, p.price_cents, p.stock FROM cart_items c "
                   "JOIN products p ON p.id = c.product_id ORDER BY c.product_id")
    return rows, sum(r["price_cents"] * r["quantity"] for r in rows)


@tool("view_cart", "What is in the cart and the total.", domain="commerce", writes=False)
def view_cart(ctx):
    rows, total = _cart(ctx)
    return {"items": [{"product_id": r["product_id"], "name": r["name"], "quantity": r["quantity"],
                       "price": money(r["price_cents"])} for r in rows], "total": money(total)}


def _payment(ctx, payment_method_id: str | None) -> dict:
    if payment_method_id is None:
        return ctx.require("SELECT * FROM payment_methods WHERE is_default = 1", what="default payment method")
    return ctx.require("SELECT * FROM payment_methods WHERE id = ?", payment_method_id, what="payment method")


def _create_order(ctx, items: list[dict], total: int, payment: dict) -> dict:
    for item in items:
        ctx.run("UPDATE products SET stock = stock - ? WHERE id = ?", item["quantity"], item["product_id"])
    order_id = ctx.next_id("o")
    eta = (ctx.now.date() + timedelta(days=3)).isoformat()
    ctx.insert("orders", {"id": order_id, "items": json.dumps(items), "total_cents": total,
                          "payment_method_id": payment["id"], "status": "processing",
                          "placed_at": ctx.now.isoformat(timespec="minutes"), "carrier": None, "eta": eta})
    return {"order_id": order_id, "total": money(total), "paid_with": f"{payment['brand']} {payment['last4']}",
            "eta": eta}


PAYMENT_PARAM = ident("payment method id; the default card if omitted")


@tool("checkout", "Buy everything in the cart.", domain="commerce", sensitive=True,
      params={"payment_method_id": PAYMENT_PARAM}, required=[])
def checkout(ctx, payment_method_id=None):
    payment = _payment(ctx, payment_method_id)
    rows, total = _cart(ctx)
    if not rows:
        raise ToolError("empty_cart", "the cart is empty")
    for row in rows:
        if row["stock"] < row["quantity"]:
            raise ToolError("out_of_stock", f"only {row['stock']} of {row['name']} in stock")
    ctx.run("DELETE FROM cart_items")
    items = [{"product_id": r["product_id"], "quantity": r["quantity"]} for r in rows]
    return _create_order(ctx, items, total, payment)


@tool("place_order", "Buy one product right away, without the cart.", domain="commerce", sensitive=True,
      params={"product_id": ident("the product's id"),
              "quantity": integer(f"how many, 1 to {MAX_QUANTITY}", 1, MAX_QUANTITY),
              "payment_method_id": PAYMENT_PARAM}, required=["product_id"])
def place_order(ctx, product_id, quantity=1, payment_method_id=None):
    product = _product(ctx, product_id)
    payment = _payment(ctx, payment_method_id)
    if product["stock"] < quantity:
        raise ToolError("out_of_stock", f"only {product['stock']} of {product['name']} in stock")
    items = [{"product_id": product_id, "quantity": quantity}]
    return _create_order(ctx, items, product["price_cents"] * quantity, payment)


def _order_view(ctx, row: dict) -> dict:
    items = json.loads(row["items"])
    names = {r["id"]: r["name"] for r in ctx.all("SELECT id, name FROM products")}
    out = {"id": row["id"], "status": row["status"], "total": money(row["total_cents"]),
           "items": [f"{it['quantity']} x {names.get(it['product_id'], it['product_id'])}" for it in items],
           "placed": row["placed_at"][:10]}
    if row["eta"] and row["status"] in ("processing", "shipped"):
        out["eta"] = row["eta"]
    return out


@tool("list_orders", "Recent orders, newest first.", domain="commerce", writes=False,
      params={"status": enum("only orders in this state", ["processing", "shipped", "delivered", "cancelled"])},
      required=[])
def list_orders(ctx, status=None):
    sql, params = "SELECT * FROM orders", []
    if status is not None:
        sql, params = sql + " WHERE status = ?", [status]
    return {"orders": [_order_view(ctx, r) for r in ctx.all(sql + " ORDER BY placed_at DESC LIMIT 8", *params)]}


@tool("track_order", "Delivery status of an order: carrier, state and expected date.", domain="commerce",
      writes=False, params={"order_id": ident("the order's id")})
def track_order(ctx, order_id):
    row = ctx.require("SELECT * FROM orders WHERE id = ?", order_id, what="order")
    out = {"order_id": order_id, "status": row["status"], "carrier": row["carrier"]}
    if row["eta"] and row["status"] in ("processing", "shipped"):
        out["eta"] = row["eta"]
    return out


@tool("cancel_order", "Cancel an order that has not shipped yet; the payment is refunded.", domain="commerce",
      params={"order_id": ident("the order's id")})
def cancel_order(ctx, order_id):
    row = ctx.require("SELECT * FROM orders WHERE id = ?", order_id, what="order")
    if row["status"] != "processing":
        raise ToolError("cannot_cancel", f"order {order_id} is {row['status']}; only processing orders can be cancelled")
    ctx.run("UPDATE orders SET status = 'cancelled' WHERE id = ?", order_id)
    for item in json.loads(row["items"]):
        ctx.run("UPDATE products SET stock = stock + ? WHERE id = ?", item["quantity"], item["product_id"])
    return {"cancelled": order_id, "refund": money(row["total_cents"])}


@tool("list_payment_methods", "The saved payment cards.", domain="commerce", writes=False)
def list_payment_methods(ctx):
    return {"payment_methods": [{"id": r["id"], "brand": r["brand"], "last4": r["last4"],
                                 "default": bool(r["is_default"])}
                                for r in ctx.all("SELECT * FROM payment_methods ORDER BY id")]}


@tool("set_default_payment_method", "Choose the card used when none is named.", domain="commerce",
      params={"payment_method_id": ident("the card's id")})
def set_default_payment_method(ctx, payment_method_id):
    row = _payment(ctx, payment_method_id)
    ctx.run("UPDATE payment_methods SET is_default = (id = ?)", payment_method_id)
    return {"default": f"{row['brand']} {row['last4']}"}


@tool("search_venues", "Find restaurants, salons, clinics and gyms by name or kind.", domain="commerce",
      writes=False, params={"query": string("a name or a kind of place", minLength=1)})
def search_venues(ctx, query):
    like = f"%{query.strip().lower()}%"
    rows = ctx.all("SELECT * FROM venues WHERE lower(name) LIKE ? OR lower(kind) LIKE ? ORDER BY rating DESC LIMIT 5",
                   like, like)
    return {"venues": [{"id": r["id"], "name": r["name"], "kind": r["kind"], "address": f"{r['address']}, {r['city']}",
                        "rating": r["rating"]} for r in rows]}


@tool("check_availability", "Free booking times at a venue on a date.", domain="commerce", writes=False,
      params={"venue_id": ident("the venue's id"), "date": date_param("the day")})
def check_availability(ctx, venue_id, date):
    ctx.require("SELECT id FROM venues WHERE id = ?", venue_id, what="venue")
    date = parse_date(date)
    return {"venue_id": venue_id, "date": date, "free": [t for t in SLOT_TIMES if slot_is_free(venue_id, date, t)]}


@tool("make_booking", "Book a table or appointment at a venue.", domain="commerce",
      params={"venue_id": ident("the venue's id"), "date": date_param("the day"), "time": time_param("the time"),
              "party_size": integer(f"number of people, 1 to {MAX_PARTY}", 1, MAX_PARTY)})
def make_booking(ctx, venue_id, date, time, party_size):
    venue = ctx.require("SELECT * FROM venues WHERE id = ?", venue_id, what="venue")
    date = parse_date(date)
    if date < ctx.now.date().isoformat():
        raise ToolError("in_the_past", f"{date} is in the past")
    if not slot_is_free(venue_id, date, time):
        raise ToolError("slot_taken", f"{venue['name']} has no free slot at {time} on {date}; check availability")
    booking_id = ctx.next_id("b")
    ctx.insert("bookings", {"id": booking_id, "venue_id": venue_id, "date": date, "time": time,
                            "party_size": party_size, "status": "confirmed"})
    return {"booking_id": booking_id, "venue": venue["name"], "date": date, "time": time, "party_size": party_size}


@tool("list_bookings", "Upcoming bookings.", domain="commerce", writes=False)
def list_bookings(ctx):
    rows = ctx.all("SELECT b.*, v.name AS venue FROM bookings b JOIN venues v ON v.id = b.venue_id "
                   "WHERE b.status = 'confirmed' ORDER BY b.date, b.time")
    return {"bookings": [{"id": r["id"], "venue": r["venue"], "date": r["date"], "time": r["time"],
                          "party_size": r["party_size"]} for r in rows]}


@tool("cancel_booking", "Cancel a booking.", domain="commerce", params={"booking_id": ident("the booking's id")})
def cancel_booking(ctx, booking_id):
    row = ctx.require("SELECT * FROM bookings WHERE id = ?", booking_id, what="booking")
    if row["status"] != "confirmed":
        raise ToolError("not_active", f"booking {booking_id} is already {row['status']}")
    ctx.run("UPDATE bookings SET status = 'cancelled' WHERE id = ?", booking_id)
    return {"cancelled": booking_id}
