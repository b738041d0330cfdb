"""Commerce intents: orders and deliveries, the cart, shopping, bookings and payment cards."""

from __future__ import annotations

import json
from datetime import date

from botpsy.world import phrasing
from botpsy.world.intent import Ask, Ctx, Draft, Intent, Invalid, call
from botpsy.world.registry import money
from botpsy.world.tools_commerce import MAX_PARTY, MAX_QUANTITY, SLOT_TIMES, matches_query, slot_is_free
from botpsy.world.words import PRODUCT_ADJECTIVES


def item_name(product: dict) -> str:
    """The generic part of a product name ("Zelvo pro USB-C charger" -> "USB-C charger")."""
    words = product["name"].split()
    rest = words[1:]
    return " ".join(rest[1:]) if rest and rest[0] in PRODUCT_ADJECTIVES else " ".join(rest)


def _order_eta_facts(order: dict) -> list[list[str]]:
    facts = [[order["status"]]]
    if order["eta"] and order["status"] in ("processing", "shipped"):
        facts.append(phrasing.date_alternatives(date.fromisoformat(order["eta"])))
    return facts


def draw_track_order(ctx: Ctx) -> Draft | None:
    order = ctx.pick_row("SELECT * FROM orders WHERE status IN ('processing', 'shipped', 'delivered')")
    if order is None:
        return None
    answer = f"Order {order['id']} is {order['status']}"
    if order["eta"] and order["status"] != "delivered":
        answer += f", expected on {phrasing.nice_date(date.fromisoformat(order['eta']))}"
    if order["carrier"]:
        answer += f" ({order['carrier']})"
    return Draft({"order": order["id"]}, [[call("track_order", order_id=order["id"])]], answer + ".",
                 action="track orders", facts=_order_eta_facts(order))


def draw_cancel_order(ctx: Ctx) -> Draft | None:
    order = ctx.pick_row("SELECT * FROM orders WHERE status = 'processing'")
    if order is None:
        return None
    return Draft({"order": order["id"]}, [[call("cancel_order", order_id=order["id"])]],
                 f"Order {order['id']} is cancelled; {money(order['total_cents']):.2f} will be refunded.",
                 action="cancel orders")


def draw_view_cart(ctx: Ctx) -> Draft:
    rows = ctx.rows("SELECT c.quantity, p.name FROM cart_items c JOIN products p ON p.id = c.product_id "
                    "ORDER BY c.product_id")
    if not rows:
        return Draft({}, [[call("view_cart")]], "Your cart is empty.", action="look at the cart", facts=[["empty"]])
    listing = ", ".join(f"{r['quantity']} x {r['name']}" for r in rows)
    return Draft({}, [[call("view_cart")]], f"In your cart: {listing}.", action="look at the cart",
                 facts=[[r["name"]] for r in rows])


def draw_cards(ctx: Ctx) -> Draft:
    rows = ctx.rows("SELECT * FROM payment_methods ORDER BY id")
    listing = ", ".join(f"{r['brand']} ending {r['last4']}{' (default)' if r['is_default'] else ''}" for r in rows)
    return Draft({}, [[call("list_payment_methods")]], f"Your saved cards: {listing}.",
                 action="look at payment methods", facts=[[r["last4"]] for r in rows])


def draw_bookings(ctx: Ctx) -> Draft | None:
    rows = ctx.rows("SELECT b.*, v.name FROM bookings b JOIN venues v ON v.id = b.venue_id "
                    "WHERE status = 'confirmed' ORDER BY date, time")
    if not rows:
        return None
    listing = "; ".join(f"{r['name']} on {phrasing.nice_date(date.fromisoformat(r['date']))} at "
                        f"{phrasing.nice_time(r['time'])}" for r in rows)
    return Draft({}, [[call("list_bookings")]], f"Your bookings: {listing}.", action="look at bookings",
                 facts=[[r["name"]] for r in rows])


_NAMEABLE: dict[tuple, list[str]] = {}


def _nameable(catalogue: list[dict]) -> list[str]:
    """Ids of the products a user can name unambiguously: searching their item finds just them."""
    key = tuple((r["id"], r["name"], r["category"]) for r in catalogue)
    if key not in _NAMEABLE:
        if len(_NAMEABLE) > 256:
            _NAMEABLE.clear()
        items = [item_name(r) for r in catalogue]
        _NAMEABLE[key] = [r["id"] for r, item in zip(catalogue, items)
                          if sum(matches_query(item, other) for other in catalogue) == 1]
    return _NAMEABLE[key]


def _product(ctx: Ctx, min_stock: int = 1) -> dict | None:
    catalogue = ctx.rows("SELECT * FROM products ORDER BY id")
    nameable = set(_nameable(catalogue))
    rows = [r for r in catalogue if r["stock"] >= min_stock and r["id"] in nameable]
    return ctx.rng.choice(rows) if rows else None


def draw_price(ctx: Ctx) -> Draft | None:
    product = _product(ctx, min_stock=0)
    if product is None:
        return None
    item = item_name(product)
    price = f"{money(product['price_cents']):.2f}"
    return Draft({"item": item}, [[call("search_products", query=item)]],
                 f"The {product['name']} costs {price}.", action="search the shop", facts=[[price]])


def draw_add_to_cart(ctx: Ctx) -> Draft | None:
    qty = ctx.rng.choice([1, 1, 2, 3])
    product = _product(ctx, min_stock=qty + 2)
    if product is None or ctx.rows("SELECT 1 FROM cart_items WHERE product_id = ?", product["id"]):
        return None
    item = item_name(product)
    return Draft({"item": item, "qty": qty, "count": _count(qty, item)},
                 [[call("search_products", query=item)], [call("add_to_cart", product_id=product["id"], quantity=qty)]],
                 f"Added {qty} x {product['name']} to your cart.", action="add things to the cart")


def _count(qty: int, item: str) -> str:
    """'one USB-C charger', '3 USB-C chargers', 'a pack of green tea', '2 packs of AA batteries'."""
    if item.endswith("s") or item.endswith("tea") or item.endswith("coffee") or item.endswith("mix"):
        return f"a pack of {item}" if qty == 1 else f"{qty} packs of {item}"
    return f"one {item}" if qty == 1 else f"{qty} {item}s"


def _bad_count(rng, slots):
    value = rng.choice([15, 20, 25, 50, 12, 30])
    return _count(value, slots["item"]), str(value), (
        f"I can't add {value}: the cart takes at most {MAX_QUANTITY} of one product. "
        f"How many would you like, up to {MAX_QUANTITY}?")


def _free_slot(ctx: Ctx, venue_id: str) -> tuple[date, str]:
    while True:
        day = phrasing.upcoming_day(ctx.rng, ctx.today, 1, 10)
        time = ctx.rng.choice(SLOT_TIMES[2:])
        if slot_is_free(venue_id, day.isoformat(), time):
            return day, time


def draw_book(ctx: Ctx) -> Draft | None:
    venue = ctx.pick_row("SELECT * FROM venues WHERE kind = 'restaurant'")
    if venue is None:
        return None
    day, time = _free_slot(ctx, venue["id"])
    party = ctx.rng.randint(2, 8)
    return Draft({"venue": venue["name"], "date": ctx.date(day), "time": ctx.time(time), "party": party},
                 [[call("search_venues", query=venue["name"])],
                  [call("make_booking", venue_id=venue["id"], date=day.isoformat(), time=time, party_size=party)]],
                 f"Booked {venue['name']} for {party} on {phrasing.nice_date(day)} at {phrasing.nice_time(time)}.",
                 action="make bookings")


def _bad_party(rng, slots):
    value = rng.choice([25, 30, 40, 60, 100])
    return str(value), str(value), (f"Bookings take at most {MAX_PARTY} people, so I can't book for {value}. "
                                    "Should I book a smaller table?")


def draw_default_card(ctx: Ctx) -> Draft | None:
    card = ctx.pick_row("SELECT * FROM payment_methods WHERE is_default = 0")
    if card is None:
        return None
    return Draft({"brand": card["brand"]}, [[call("list_payment_methods")],
                                            [call("set_default_payment_method", payment_method_id=card["id"])]],
                 f"Your {card['brand']} ending {card['last4']} is now the default card.", action="change payment settings")


def draw_cancel_booking(ctx: Ctx) -> Draft | None:
    row = ctx.pick_row("SELECT b.*, v.name FROM bookings b JOIN venues v ON v.id = b.venue_id WHERE status = 'confirmed'")
    if row is None or len(ctx.rows("SELECT id FROM bookings WHERE venue_id = ?", row["venue_id"])) > 1:
        return None
    return Draft({"venue": row["name"]}, [[call("list_bookings")], [call("cancel_booking", booking_id=row["id"])]],
                 f"Your booking at {row['name']} is cancelled.", action="cancel bookings")


def draw_free_slots(ctx: Ctx) -> Draft | None:
    venue = ctx.pick_row("SELECT * FROM venues")
    if venue is None:
        return None
    day = phrasing.upcoming_day(ctx.rng, ctx.today, 1, 10)
    free = [t for t in SLOT_TIMES if slot_is_free(venue["id"], day.isoformat(), t)]
    return Draft({"venue": venue["name"], "date": ctx.date(day)},
                 [[call("search_venues", query=venue["name"])],
                  [call("check_availability", venue_id=venue["id"], date=day.isoformat())]],
                 f"{venue['name']} has free slots on {phrasing.nice_date(day)} at " + ", ".join(free) + ".",
                 action="check availability", facts=[phrasing.time_alternatives(t) for t in free[:2]])


def draw_cancel_order_by_item(ctx: Ctx) -> Draft | None:
    orders = [o for o in ctx.rows("SELECT * FROM orders WHERE status = 'processing'") if len(json.loads(o["items"])) == 1]
    if not orders:
        return None
    order = ctx.rng.choice(orders)
    product = ctx.rows("SELECT * FROM products WHERE id = ?", json.loads(order["items"])[0]["product_id"])[0]
    item = item_name(product)
    others = [o for o in ctx.rows("SELECT items FROM orders")
              if any(it["product_id"] == product["id"] for it in json.loads(o["items"]))]
    if len(others) > 1:
        return None
    return Draft({"item": item}, [[call("list_orders")], [call("cancel_order", order_id=order["id"])]],
                 f"Cancelled order {order['id']} ({product['name']}); {money(order['total_cents']):.2f} will be refunded.",
                 action="cancel orders")


def draw_buy(ctx: Ctx) -> Draft | None:
    qty = ctx.rng.choice([1, 1, 2])
    product = _product(ctx, min_stock=qty)
    if product is None:
        return None
    item = item_name(product)
    total = f"{money(product['price_cents'] * qty):.2f}"
    return Draft({"item": item, "count": _count(qty, item)},
                 [[call("search_products", query=item)], [call("place_order", product_id=product["id"], quantity=qty)]],
                 f"Ordered {qty} x {product['name']} for {total} with your default card.", action="buy things",
                 confirm_prompt=f"Buy {qty} x {product['name']} for {total} with your default card?",
                 decline_answer="OK, I haven't ordered anything.")


def draw_checkout(ctx: Ctx) -> Draft | None:
    rows = ctx.rows("SELECT c.*, p.price_cents, p.stock FROM cart_items c JOIN products p ON p.id = c.product_id")
    patch = {}
    if not rows or any(r["stock"] < r["quantity"] for r in rows):
        product = _product(ctx, min_stock=2)
        if product is None:
            return None
        rows = [{"product_id": product["id"], "quantity": 1, "price_cents": product["price_cents"]}]
        patch = {"cart_items": [{"product_id": product["id"], "quantity": 1}]}
        if ctx.rows("SELECT 1 FROM cart_items"):
            return None
    total = f"{money(sum(r['price_cents'] * r['quantity'] for r in rows)):.2f}"
    return Draft({}, [[call("view_cart")], [call("checkout")]], f"Order placed: {total} charged to your default card.",
                 action="check out", patch=patch,
                 confirm_prompt=f"Your cart comes to {total}. Pay with your default card?",
                 decline_answer="OK, I haven't checked out; your cart is unchanged.")


def draw_buy_with_card(ctx: Ctx) -> Draft | None:
    product = _product(ctx)
    card = ctx.pick_row("SELECT * FROM payment_methods")
    if product is None or card is None:
        return None
    item = item_name(product)
    price = f"{money(product['price_cents']):.2f}"
    return Draft({"item": item, "brand": card["brand"]},
                 [[call("search_products", query=item), call("list_payment_methods")],
                  [call("place_order", product_id=product["id"], quantity=1, payment_method_id=card["id"])]],
                 f"Bought the {product['name']} for {price} with your {card['brand']}.", action="buy things",
                 confirm_prompt=f"Buy the {product['name']} for {price} with your {card['brand']} ending {card['last4']}?",
                 decline_answer="OK, no purchase made.")


INTENTS = [
    Intent("track_order", "commerce", "single", [
        "Where is my order {order}?", "Track order {order}.", "What's the status of order {order}?",
        "Has order {order} shipped yet?", "When will order {order} arrive?", "Check on order {order} for me.",
        "Any news on my order {order}?", "Is order {order} on its way?", "Give me an update on order {order}.",
        "What's happening with order {order}?"], draw_track_order),
    Intent("cancel_order", "commerce", "single", [
        "Cancel order {order}.", "Please cancel my order {order}.", "I want to cancel order {order}.",
        "Can you stop order {order}?", "Call off order {order}.", "Order {order} isn't needed, cancel it.",
        "Cancel the order {order}, please.", "Undo my order {order}.", "Could you cancel order {order}?",
        "Scrap order {order}."], draw_cancel_order),
    Intent("view_cart", "commerce", "single", [
        "What's in my cart?", "Show me my shopping cart.", "What have I got in the basket?", "List my cart.",
        "Is my cart empty?", "Check my cart.", "What did I put in the cart?", "Read my cart to me.",
        "Tell me what's in my cart.", "Cart contents?"], draw_view_cart),
    Intent("payment_cards", "commerce", "single", [
        "Which cards do I have saved?", "List my payment methods.", "What cards are on my account?",
        "Show my saved cards.", "Which payment cards can I use?", "What's my default card?",
        "Tell me my payment methods.", "What cards have I stored?", "Check my saved payment cards.",
        "Which cards are saved for shopping?"], draw_cards),
    Intent("list_bookings", "commerce", "single", [
        "What bookings do I have?", "List my reservations.", "Do I have any bookings coming up?",
        "Show my upcoming reservations.", "Where have I booked?", "Check my bookings.",
        "Tell me my reservations.", "Which places have I booked?", "Any reservations soon?",
        "What tables have I reserved?"], draw_bookings),
    Intent("product_price", "commerce", "single", [
        "How much is the {item}?", "What does the {item} cost?", "Price of the {item}?",
        "Check the price of the {item}.", "How expensive is the {item}?", "Look up what the {item} costs.",
        "Tell me the {item} price.", "What's the {item} going for?", "Find the price for the {item}.",
        "Is the {item} cheap?"], draw_price),
    Intent("add_to_cart", "commerce", "chain", [
        "Add {count} to my cart.", "Put {count} in the cart.", "Can you add {count} to my basket?",
        "I'd like {count} in my cart.", "Add {count} to the shopping cart, please.", "Throw {count} in my cart.",
        "Please put {count} in my basket.", "Cart: {count}.", "Stick {count} in the cart.",
        "Get {count} into my cart."], draw_add_to_cart,
        invalid=Invalid("count", _bad_count)),
    Intent("book_table", "commerce", "chain", [
        "Book a table at {venue} for {party} {date} at {time}.", "Reserve {venue} for {party} people {date}, {time}.",
        "Can you get us a table for {party} at {venue} {date} at {time}?",
        "Table for {party} at {venue} {date} at {time}, please.", "I want to book {venue} {date} at {time} for {party}.",
        "Make a reservation at {venue}: {party} people, {date}, {time}.",
        "Please book {venue} {date} at {time}, party of {party}.", "Get me a table at {venue} {date} {time} for {party}.",
        "Reserve a table for {party} {date} at {time} at {venue}.", "Book {venue} for {party} {date} at {time}."],
        draw_book,
        ask=Ask("party", ["Book a table at {venue} {date} at {time}.", "Reserve {venue} {date} at {time}.",
                          "Can you get a table at {venue} {date} at {time}?", "I want to book {venue} {date} at {time}.",
                          "Make a reservation at {venue} {date}, {time}.", "Table at {venue} {date} at {time}, please."],
                ["How many people is the table for?", "Sure, for how many people?"], ["how many", "people", "guests"],
                ["{party} people.", "For {party}.", "There will be {party} of us.", "{party}", "A table for {party}."]),
        invalid=Invalid("party", _bad_party)),
    Intent("default_card", "commerce", "chain", [
        "Make my {brand} card the default.", "Use the {brand} by default.", "Set {brand} as my default payment.",
        "Can you switch my default card to the {brand}?", "I want to pay with {brand} by default.",
        "Please make {brand} my main card.", "Change the default card to {brand}.", "Default payment: {brand}.",
        "From now on use my {brand} card.", "Switch default payment to the {brand} card."], draw_default_card),
    Intent("cancel_booking", "commerce", "chain", [
        "Cancel my booking at {venue}.", "I can't make it to {venue}, cancel the reservation.",
        "Drop my {venue} reservation.", "Can you cancel the table at {venue}?", "Cancel the {venue} booking.",
        "Please call off my reservation at {venue}.", "Remove my booking at {venue}.", "Scrap the {venue} reservation.",
        "Undo my booking with {venue}.", "Could you cancel {venue} for me?"], draw_cancel_booking),
    Intent("free_slots", "commerce", "chain", [
        "When is {venue} free {date}?", "What times can I book at {venue} {date}?",
        "Check availability at {venue} {date}.", "Does {venue} have free slots {date}?",
        "Any openings at {venue} {date}?", "Look up free times at {venue} {date}.",
        "Which slots are open at {venue} {date}?", "Is there room at {venue} {date}?",
        "Find a free time at {venue} {date}.", "Tell me {venue}'s availability {date}."], draw_free_slots),
    Intent("cancel_order_by_item", "commerce", "chain", [
        "Cancel my order for the {item}.", "I don't want the {item} anymore, cancel that order.",
        "Stop the order with the {item}.", "Can you cancel the {item} order?", "Call off my {item} order.",
        "Please cancel the order that has the {item}.", "Undo my {item} purchase.", "Scrap the {item} order.",
        "Cancel whatever order has the {item} in it.", "Could you cancel my {item} order?"],
        draw_cancel_order_by_item),
    Intent("buy_now", "commerce", "sensitive", [
        "Buy {count}.", "Order {count} for me.", "Purchase {count} right away.", "Can you order {count}?",
        "I need {count}, buy it now.", "Please order {count}.", "Get me {count}, straight away.",
        "Place an order for {count}.", "Buy {count} with my default card.", "Order {count} now."], draw_buy),
    Intent("checkout", "commerce", "sensitive", [
        "Check out my cart.", "Buy what's in my cart.", "Place the order for my cart.", "Pay for my basket.",
        "Complete my purchase.", "Go ahead and check out.", "Checkout, please.", "Order everything in the cart.",
        "Finish the checkout.", "Pay for the cart with my default card."], draw_checkout),
    Intent("buy_with_card", "commerce", "sensitive", [
        "Buy the {item} with my {brand}.", "Order the {item} and pay with the {brand} card.",
        "Purchase the {item} using my {brand}.", "Can you buy the {item} on my {brand}?",
        "Get the {item}, charge it to the {brand}.", "Please order the {item} with my {brand} card.",
        "Use my {brand} to buy the {item}.", "Pay for the {item} with the {brand}.",
        "I want the {item}, pay with {brand}.", "Order the {item} on the {brand} card."], draw_buy_with_card),
]

