"""ACEBench's airline scenario (``Travel``): three users, eleven flights, four reservations.

Fees and refunds follow ACEBench's English class, quirks included, since the gold end states
come from it: a cancellation refunds to the cash balance and leaves the reservation in place;
a new reservation's id is ``res_<count + 1>``; a cabin change is priced on the reservation's
flight before any flight change and is kept even when the balance cannot pay for it; added
bags are charged for every bag over the allowance. Calls that raised an exception there
(an unknown flight or cabin, a wrong password) return an error here and change nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta

USERS = {"user1": ("Eve", "password123", 2000.0, 50000.0, "regular"),
         "user2": ("Frank", "password456", 8000.0, 8000.0, "silver"),
         "user3": ("Grace", "password789", 1000.0, 5000.0, "gold")}
# flight_no, origin, destination, departs, arrives, seats, economy price, business price
FLIGHTS = [("CA1234", "Beijing", "Shanghai", "2024-07-15 08:00:00", "2024-07-15 10:30:00", 5, 1200, 3000),
           ("MU5678", "Shanghai", "Beijing", "2024-07-16 09:00:00", "2024-07-16 11:30:00", 3, 1900, 3000),
           ("CZ4321", "Shanghai", "Beijing", "2024-07-16 20:00:00", "2024-07-16 22:00:00", 8, 2500, 4000),
           ("CZ4352", "Shanghai", "Beijing", "2024-07-17 20:00:00", "2024-07-17 22:00:00", 8, 1600, 2500),
           ("MU3561", "Beijing", "Nanjing", "2024-07-18 08:00:00", "2024-07-18 10:00:00", 8, 1500, 4000),
           ("MU1566", "Beijing", "Nanjing", "2024-07-18 20:00:00", "2024-07-18 22:00:00", 8, 1500, 4000),
           ("CZ1765", "Nanjing", "Shenzhen", "2024-07-17 20:30:00", "2024-07-17 22:00:00", 8, 1500, 2500),
           ("CZ1765", "Nanjing", "Shenzhen", "2024-07-18 12:30:00", "2024-07-18 15:00:00", 8, 1500, 2500),
           ("MH1765", "Xiamen", "Chengdu", "2024-07-17 12:30:00", "2024-07-17 15:00:00", 8, 1500, 2500),
           ("MH2616", "Chengdu", "Xiamen", "2024-07-18 18:30:00", "2024-07-18 21:00:00", 8, 1500, 2500),
           ("MH2616", "Chengdu", "Fuzhou", "2024-07-16 18:30:00", "2024-07-16 21:00:00", 8, 1500, 2500)]
RESERVATIONS = [("res_1", "user1", "CA1234", "Economy Class", "Beijing", "Shanghai"),
                ("res_2", "user1", "MU5678", "Business Class", "Shanghai", "Beijing"),
                ("res_3", "user2", "MH1765", "Business Class", "Xiamen", "Chengdu"),
                ("res_4", "user2", "MU2616", "Business Class", "Chengdu", "Xiamen")]  # no flight MU2616: as in ACEBench
FREE_BAGS = {"regular": {"Economy Class": 1, "Business Class": 2}, "silver": {"Economy Class": 2, "Business Class": 3},
             "gold": {"Economy Class": 3, "Business Class": 3}}
BAG_FEE = 50
NOW = datetime(2024, 7, 14, 6, 0, 0)  # the clock ACEBench's cancellation rules read
AIRLINE_CANCELLED = "The airline has canceled the flight."


class Travel:
    def __init__(self) -> None:
        self.users = {uid: {"user_name": n, "password": pw, "cash_balance": cash, "bank_balance": bank,
                            "membership_level": level} for uid, (n, pw, cash, bank, level) in USERS.items()}
        self.flights = [{"flight_no": no, "origin": o, "destination": d, "depart_time": dep, "arrival_time": arr,
                         "status": "available", "seats_available": seats, "economy_price": eco, "business_price": bus}
                        for no, o, d, dep, arr, seats, eco, bus in FLIGHTS]
        self.reservations = [{"reservation_id": rid, "user_id": uid, "flight_no": no, "payment_method": "bank",
                              "cabin": cabin, "baggage": 1, "origin": o, "destination": d}
                             for rid, uid, no, cabin, o, d in RESERVATIONS]

    def _flight(self, flight_no: str) -> dict | None:
        return next((f for f in self.flights if f["flight_no"] == flight_no), None)

    def get_flight_details(self, origin: str | None = None, destination: str | None = None) -> list | str:
        found = [dict(f) for f in self.flights
                 if (not origin or f["origin"] == origin) and (not destination or f["destination"] == destination)]
        return found or "There are no direct flights that meet the criteria."

    def get_user_details(self, user_id: str, password: str) -> dict:
        user = self.users.get(user_id)
        if user and user["password"] == password:
            return {k: v for k, v in user.items() if k != "password"}
        return {"status": "error", "message": "Incorrect username or password."}

    def get_reservation_details(self, reservation_id: str | None = None, user_id: str | None = None) -> list | dict:
        if reservation_id:
            found = [r for r in self.reservations if r["reservation_id"] == reservation_id]
        elif user_id:
            found = [r for r in self.reservations if r["user_id"] == user_id]
        else:
            return {"status": "error", "message": "Please provide a valid reservation ID or user ID"}
        return [{**r, "flight_info": self._flight(r["flight_no"])} for r in found]

    def find_transfer_flights(self, origin_city: str, transfer_city: str, destination_city: str) -> list | str:
        legs = [(a, b) for a in self.flights if (a["origin"], a["destination"]) == (origin_city, transfer_city)
                for b in self.flights if (b["origin"], b["destination"]) == (transfer_city, destination_city)
                if a["status"] == b["status"] == "available" and a["arrival_time"] < b["depart_time"]]
        return [{"first_leg": a, "second_leg": b} for a, b in legs] or \
            "No connecting flights that meet the criteria were found."

    def reserve_flight(self, user_id: str, password: str, flight_no: str, cabin: str, payment_method: str,
                       baggage_count: int) -> str | dict:
        user = self.users.get(user_id)
        if not user or user["password"] != password:
            return {"status": "error", "message": "Incorrect username or password."}
        flight = next((f for f in self.flights if f["flight_no"] == flight_no and f["status"] == "available"), None)
        if flight is None:
            return {"status": "error", "message": f"Flight {flight_no} does not exist or is not available."}
        if cabin not in FREE_BAGS[user["membership_level"]]:
            return {"status": "error", "message": f"Unknown cabin {cabin!r}: use 'Economy Class' or 'Business Class'."}
        bags = int(baggage_count)
        cost = (flight["economy_price"] if cabin == "Economy Class" else flight["business_price"]) + \
            max(bags - FREE_BAGS[user["membership_level"]][cabin], 0) * BAG_FEE
        if payment_method not in ("cash", "bank"):
            return "Invalid payment method"
        if cost > user[f"{payment_method}_balance"]:
            return f"Your {payment_method} balance is insufficient. Please consider using another payment method."
        user[f"{payment_method}_balance"] -= cost
        flight["seats_available"] -= 1
        reservation_id = f"res_{len(self.reservations) + 1}"
        self.reservations.append({"reservation_id": reservation_id, "user_id": user_id, "flight_no": flight_no,
                                  "payment_method": payment_method, "cabin": cabin, "baggage": bags})
        return f"Booking successful. Reservation ID: {reservation_id}. Total cost: {cost} yuan " \
               "(including baggage fees)."

    def modify_flight(self, user_id: str, reservation_id: str, new_flight_no: str | None = None,
                      new_cabin: str | None = None, add_baggage: int = 0, new_payment_method: str | None = None) -> str:
        reservation = next((r for r in self.reservations
                            if r["reservation_id"] == reservation_id and r["user_id"] == user_id), None)
        if reservation is None:
            return "Reservation not found or user ID does not match."
        current = self._flight(reservation["flight_no"])
        if current is None:
            return "Flight information not found."
        user = self.users[user_id]
        payment = new_payment_method or reservation["payment_method"]
        notes = []
        if new_flight_no and new_flight_no != reservation["flight_no"]:
            new = self._flight(new_flight_no)
            if not new or (new["origin"], new["destination"]) != (current["origin"], current["destination"]):
                return "Flight change failed: Invalid new flight number or destination does not match."
            reservation["flight_no"] = new_flight_no
            notes.append("Flight number has been changed.")
        if new_cabin and new_cabin != reservation.get("cabin"):
            prices = {"Economy Class": current["economy_price"], "Business Class": current["business_price"]}
            difference = prices.get(new_cabin, 0) - prices.get(reservation["cabin"], 0)
            reservation["cabin"] = new_cabin
            if difference > 0:
                paid = self._pay(user, payment, difference)
                notes.append(f"Cabin change successful. Price difference paid: {difference}." if paid
                             else "Insufficient balance to pay the cabin price difference.")
            elif difference < 0:
                self._pay(user, payment, difference)
                notes.append(f"Cabin change successful. Price difference refunded: {-difference}.")
        if add_baggage and int(add_baggage) > 0:
            free = FREE_BAGS.get(user["membership_level"], {}).get(reservation["cabin"], 0)
            total = reservation.get("baggage", 0) + int(add_baggage)
            fee = max(0, total - free) * BAG_FEE
            if fee > 0:
                paid = self._pay(user, payment, fee)
                notes.append(f"Baggage has been added. Additional fee to be paid: {fee}." if paid
                             else "Insufficient balance to pay the additional baggage fees.")
            reservation["baggage"] = total
        return " ".join(notes) or "Modification completed with no additional fees."

    @staticmethod
    def _pay(user: dict, method: str, amount: float) -> bool:
        """Take ``amount`` (a refund when negative) from the cash or bank balance; False when it cannot pay."""
        if method not in ("cash", "bank"):
            return True  # ACEBench takes nothing from an unknown method and reports success
        key = f"{method}_balance"
        if user[key] - amount < 0:
            return False
        user[key] -= amount
        return True

    def cancel_reservation(self, user_id: str, reservation_id: str, reason: str) -> str:
        user = self.users.get(user_id)
        if not user:
            return "Invalid user ID."
        reservation = next((r for r in self.reservations
                            if r["reservation_id"] == reservation_id and r["user_id"] == user_id), None)
        if reservation is None:
            return "Invalid reservation ID or it does not belong to the user."
        flight = self._flight(reservation["flight_no"])
        if flight is None:
            return "Invalid flight information."
        departs = datetime.strptime(flight["depart_time"], "%Y-%m-%d %H:%M:%S")
        if NOW > departs:
            return "The flight segment has been used and cannot be canceled."
        price = flight["economy_price"] if reservation["cabin"] == "Economy Class" else flight["business_price"]
        if reason == AIRLINE_CANCELLED or departs - NOW > timedelta(days=1):
            user["cash_balance"] += price
            return f"The reservation has been canceled and {price} yuan has been refunded."
        fee = price * 0.1
        user["cash_balance"] += price - fee
        return f"Less than 24 hours before departure. A cancellation fee of {fee} yuan has been deducted, " \
               f"and {price - fee} yuan has been refunded."

