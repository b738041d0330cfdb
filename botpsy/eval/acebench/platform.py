"""ACEBench's simulated platforms for the agent category, in memory: a phone (device, messages,
reminders, food delivery) and an airline (``Travel``).

Their data and behaviour follow ACEBench's English scenario classes, because the gold end states
were made with them: the same six users, inbox, reminders, menus, flights and reservations, the
same capacities, fees and refund rules, and the same saved attributes (``SAVED``), whose values
after a run are compared with the gold ``ground_truth``. Where ACEBench's code would raise
(a flight number that does not exist, a cabin it does not know), the call here returns an error
and changes nothing, which is what an exception did there. ``search_reminders`` is offered by
ACEBench's function list but missing from its classes; here it is a read-only keyword search.

``Platform(involved_classes, initial_config)`` holds one scenario; ``call(name, arguments)``
runs a function and returns its result (JSON-able); ``state()`` is the end state in the gold's
shape (``[{class: {attribute: value}}]``, keys as JSON makes them).
"""

from __future__ import annotations

import copy
import inspect
import json
from typing import Any

SAVED = {"BaseApi": ("wifi", "logged_in"), "MessageApi": ("inbox",), "ReminderApi": ("reminder_list",),
         "FoodPlatform": ("users", "logged_in_users", "orders"), "Travel": ("users", "reservations")}
PHONE_CLASSES = ("BaseApi", "MessageApi", "ReminderApi", "FoodPlatform")

PHONE_USERS = {"Eve": ("USR100", "123-456-7890", "Software Engineer"),
               "Frank": ("USR101", "234-567-8901", "Data Scientist"),
               "Grace": ("USR102", "345-678-9012", "Product Manager"),
               "Helen": ("USR103", "456-789-0123", "UX Designer"),
               "Isaac": ("USR104", "567-890-1234", "DevOps Engineer"),
               "Jack": ("USR105", "678-901-2345", "Marketing Specialist")}
INBOX = [("USR100", "USR101", "Hey Frank, don't forget about our meeting on 2024-06-11 at 4 PM in Conference Room 1.",
          "2024-06-09"),
         ("USR101", "USR102", "Can you help me order a \"Margherita Pizza\" delivery? The merchant is Domino's.",
          "2024-03-09"),
         ("USR102", "USR103", "Please check the milk tea delivery options available from Heytea and purchase a cheaper "
                              "milk tea for me. After making the purchase, remember to reply to me with \"Already "
                              "bought.\"", "2023-12-05"),
         ("USR103", "USR102", "No problem Helen, I can assist you.", "2024-09-09"),
         ("USR104", "USR105", "Isaac, are you available for a call?", "2024-06-06"),
         ("USR105", "USR104", "Yes Jack, let's do it in 30 minutes.", "2024-01-15")]
REMINDERS = [("Doctor's Appointment", "Visit Dr. Smith for a checkup.", "2024-07-15 09:30"),
             ("Team Meeting", "Monthly project review with the team.", "2024-07-17 11:00"),
             ("To-do list", "First, help Frank place a food delivery order at \"Hema Fresh,\" ordering two "
                            "\"Fresh Gift Packs.\" Then, send a message to Frank saying, \"The price of the purchased "
                            "goods is () yuan.\" Replace the parentheses with the actual amount, keeping one decimal "
                            "place.",
              "2024-07-16 11:00")]
FOOD_USERS = {"Eve": ("U100", "password123", 500.0), "Frank": ("U101", "password456", 300.0),
              "Grace": ("U102", "password789", 150.0), "Helen": ("U103", "password321", 800.0),
              "Isaac": ("U104", "password654", 400.0), "Jack": ("U105", "password654", 120.0)}
MERCHANTS = {"Domino's": ("M100", "Pizza", [("Margherita Pizza", 68.0), ("Super Supreme Pizza", 88.0)]),
             "Rice Village Bibimbap": ("M101", "Bibimbap",
                                       [("Stone Pot Bibimbap", 35.0), ("Korean Beef Bibimbap", 45.0)]),
             "Haidilao": ("M102", "Hotpot", [("Beef Rolls", 68.0), ("Seafood Platter", 88.0)]),
             "Heytea": ("M103", "Milk Tea", [("Cheese Milk Tea", 25.0), ("Four Seasons Spring Milk Tea", 22.0)]),
             "Hema Fresh": ("M104", "Fresh Grocery", [("Organic Vegetable Pack", 15.0), ("Fresh Gift Pack", 99.0)]),
             "Jiutian BBQ": ("M105", "BBQ", [("Korean Grilled Beef", 128.0), ("Grilled Pork Belly", 78.0)])}
CAPACITY = 6  # messages in the inbox, reminders in the list


def failed(message: str) -> dict[str, Any]:
    return {"status": False, "message": message}


class Device:
    """``BaseApi``: Wi-Fi and the device login, shared by every phone app."""

    def __init__(self, config: dict) -> None:
        self.wifi = bool(config.get("wifi", False))
        self.logged_in = bool(config.get("logged_in", True))

    def turn_on_wifi(self) -> dict:
        self.wifi = True
        return {"status": True, "message": "Wi-Fi has been turned on"}

    def login_device(self) -> dict:
        self.logged_in = True
        return {"status": True, "message": "Device has been logged in"}


class Messages:
    """``MessageApi``: the inbox of six users (at most ``CAPACITY`` messages)."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.users = {name: {"user_id": uid, "phone_number": phone, "occupation": job}
                      for name, (uid, phone, job) in PHONE_USERS.items()}
        self.inbox: dict[int, dict] = {i + 1: {"sender_id": s, "receiver_id": r, "message": m, "time": t}
                                       for i, (s, r, m, t) in enumerate(INBOX)}
        self.counter = len(INBOX)

    def send_message(self, sender_name: str, receiver_name: str, message: str) -> dict:
        if not self.device.logged_in:
            return failed("Device not logged in, unable to send message")
        if not self.device.wifi:
            return failed("Wi-Fi is turned off, cannot send messages at this time")
        if len(self.inbox) >= CAPACITY:
            return failed("Inbox capacity is full. You need to ask the user which message to delete.")
        if sender_name not in self.users or receiver_name not in self.users:
            return failed("Sender or receiver does not exist")
        self.counter += 1  # a sent message has no time, as in ACEBench (the gold states have none)
        self.inbox[self.counter] = {"sender_id": self.users[sender_name]["user_id"],
                                    "receiver_id": self.users[receiver_name]["user_id"], "message": message}
        return {"status": True, "message": f"Message successfully sent to {receiver_name}."}

    def delete_message(self, message_id: int) -> dict:
        if not self.device.logged_in:
            return failed("Device not logged in, unable to delete message")
        if message_id not in self.inbox:
            return failed("Message ID does not exist")
        del self.inbox[message_id]
        return {"status": True, "message": f"Message ID {message_id} has been successfully deleted."}

    def view_messages_between_users(self, sender_name: str, receiver_name: str) -> dict:
        if not self.device.logged_in:
            return failed("Device not logged in, unable to view message information")
        if sender_name not in self.users:
            return failed("Sender does not exist")
        if receiver_name not in self.users:
            return failed("Receiver does not exist")
        sender, receiver = self.users[sender_name]["user_id"], self.users[receiver_name]["user_id"]
        found = [{"id": i, "sender": sender_name, "receiver": receiver_name, "message": m["message"]}
                 for i, m in self.inbox.items() if m["sender_id"] == sender and m["receiver_id"] == receiver]
        return {"status": True, "messages": found} if found else failed("No related message records found")

    def search_messages(self, user_name: str, keyword: str) -> dict:
        if user_name not in self.users:
            return failed("User does not exist")
        uid = self.users[user_name]["user_id"]
        found = [{"id": i, **{k: m[k] for k in ("sender_id", "receiver_id", "message")}} for i, m in self.inbox.items()
                 if uid in (m["sender_id"], m["receiver_id"]) and str(keyword).lower() in m["message"].lower()]
        return {"status": True, "messages": found} if found else failed("No messages found containing the keyword")

    def get_latest_message_id(self) -> dict:
        return self._dated_message(latest=True)

    def get_earliest_message_id(self) -> dict:
        return self._dated_message(latest=False)

    def _dated_message(self, latest: bool) -> dict:
        which = "latest" if latest else "earliest"
        if not self.device.logged_in:
            return failed(f"Device not logged in, unable to retrieve the {which} sent message ID.")
        dated = [(m["time"], -i if latest else i) for i, m in self.inbox.items() if m.get("time")]
        if not dated:
            return failed("No message records found")
        message_id = abs((max if latest else min)(dated)[1])  # on a tie, the lower id (ACEBench keeps the first)
        return {"status": True, "message": f"The {which} message ID is {message_id}", "message_id": message_id}


class Reminders:
    """``ReminderApi``: titled reminders (at most ``CAPACITY``)."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.reminder_list: dict[int, dict] = {
            i + 1: {"reminder_id": 1001 + i, "title": title, "description": text, "time": time, "notified": False}
            for i, (title, text, time) in enumerate(REMINDERS)}
        self.counter = len(REMINDERS)

    def view_reminder_by_title(self, title: str) -> dict:
        if not self.device.logged_in:
            return failed("The device is not logged in, so you cannot view notifications")
        for reminder in self.reminder_list.values():
            if reminder["title"] == title:
                return {"status": True, "reminder": reminder}
        return failed(f"No reminder found with the title '{title}'.")

    def add_reminder(self, title: str, description: str, time: str) -> dict:
        if not self.device.logged_in:
            return failed("Device not logged in. Unable to add a new reminder.")
        if len(self.reminder_list) >= CAPACITY:
            return failed("Reminder capacity is full. Unable to add a new reminder.")
        self.counter += 1
        self.reminder_list[self.counter] = {"reminder_id": self.counter, "title": title, "description": description,
                                            "time": time, "notified": False}
        return {"status": True, "message": f"Reminder '{title}' was successfully added."}

    def search_reminders(self, keyword: str) -> dict:
        word = str(keyword).lower()
        found = [r for r in self.reminder_list.values()
                 if word in r["title"].lower() or word in r["description"].lower()]
        return {"status": True, "reminders": found} if found else failed("No reminders found containing the keyword")


class FoodPlatform:
    """``FoodPlatform``: accounts with balances, six merchants' menus, delivery orders."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.users = {name: {"user_id": uid, "password": pw, "balance": money}
                      for name, (uid, pw, money) in FOOD_USERS.items()}
        self.menus = {name: [{"product": p, "price": price} for p, price in menu]
                      for name, (_, _, menu) in MERCHANTS.items()}
        self.logged_in_users: list[str] = []
        self.orders: list[dict] = []

    def login_food_platform(self, username: str, password: str) -> dict:
        if not self.device.wifi:
            return failed("Wi-Fi is not enabled, unable to login")
        if username not in self.users:
            return failed("User does not exist")
        if self.users[username]["password"] != password:
            return failed("Incorrect password")
        if username in self.logged_in_users:
            return failed(f"{username} is already logged in")
        self.logged_in_users.append(username)
        return {"status": True, "message": f"User {username} has successfully logged in!"}

    def check_balance(self, user_name: str) -> float:
        return self.users[user_name]["balance"] if user_name in self.users else 0.0

    def get_products(self, merchant_name: str) -> list | dict:
        return self.menus.get(merchant_name) or failed(f"Merchant '{merchant_name}' does not exist")

    def add_food_delivery_order(self, username: str, merchant_name: str, items: list) -> dict:
        if username not in self.logged_in_users:
            return failed(f"User {username} is not logged in to the food platform")
        if merchant_name not in self.menus:
            return failed("Merchant does not exist")
        total, lines = 0.0, []
        for item in items if isinstance(items, list) else [items]:
            if not isinstance(item, dict):
                return failed(f"Each item must be an object with product and quantity, got {item!r}")
            product, quantity = item.get("product"), item.get("quantity", 1)
            if not isinstance(quantity, int) or isinstance(quantity, bool) or quantity <= 0:
                return failed(f"Invalid quantity {quantity} for product {product}")
            price = next((p["price"] for p in self.menus[merchant_name] if p["product"] == product), None)
            if price is None:
                return failed(f"Product {product} does not exist in {merchant_name}'s menu")
            total += price * quantity
            lines.append({"product": product, "quantity": quantity, "price_per_unit": price})
        if total > self.users[username]["balance"]:
            return failed("Insufficient balance to place the order")
        self.users[username]["balance"] -= total
        self.orders.append({"user_name": username, "merchant_name": merchant_name, "items": lines,
                            "total_price": total})
        return {"status": True, "message": f"Food delivery order successfully placed with {merchant_name}. "
                                           f"Total amount: {total} yuan"}


class Platform:
    """One agent item's world: the involved classes, set up from ``initial_config``."""

    def __init__(self, involved_classes: list[str], initial_config: dict | None = None) -> None:
        from botpsy.eval.acebench.travel import Travel

        config = copy.deepcopy(initial_config or {})
        unknown = [c for c in involved_classes if c not in SAVED]
        if unknown:
            raise ValueError(f"ACEBench classes {unknown} are not simulated (known: {', '.join(SAVED)})")
        self.classes = list(involved_classes)
        self.device = Device(config.get("BaseApi", {}))
        self.apps: dict[str, Any] = {}
        if any(c in PHONE_CLASSES for c in self.classes):
            self.apps["BaseApi"] = self.device
        makers = {"MessageApi": Messages, "ReminderApi": Reminders, "FoodPlatform": FoodPlatform}
        for name in self.classes:
            if name in makers:
                self.apps[name] = makers[name](self.device)
            elif name == "Travel":
                self.apps[name] = Travel()
        self.functions = {method: getattr(app, method) for app in self.apps.values()
                          for method in dir(app) if not method.startswith("_") and callable(getattr(app, method))}

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """Run one function; a call this world cannot run comes back as an error, never an exception."""
        function = self.functions.get(name)
        if not isinstance(arguments, dict):
            return {"status": False, "error": "invalid_arguments", "message": f"{name}: arguments must be an object"}
        if function is None:
            return {"status": False, "error": "unknown_function",
                    "message": f"{name} is not available here (involved: {', '.join(self.classes)})"}
        try:
            inspect.signature(function).bind(**arguments)
        except TypeError as exc:
            return {"status": False, "error": "invalid_arguments", "message": f"{name}: {exc}"}
        try:
            return json.loads(json.dumps(function(**arguments), default=str))
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            return {"status": False, "error": "execution_error", "message": f"Error during execution of {name}: {exc}"}

    def state(self) -> list[dict[str, dict]]:
        """The saved attributes of each involved class, as the gold ``ground_truth`` holds them."""
        out = []
        for name in self.classes:
            app = self.apps[name] if name != "BaseApi" else self.device
            out.append({name: {attr: getattr(app, attr) for attr in SAVED[name]}})
        return json.loads(json.dumps(out))
