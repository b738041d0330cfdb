"""Word lists the world is seeded from: people, places, products, venues, apps and texts.

Every list is plain data written for this project. A world draws from them with its own
``random.Random(seed)``, so two seeds give different contacts, shops and calendars, and the
same seed always gives the same ones.
"""

FIRST_NAMES = [
    "Anna", "Ben", "Chloe", "Dario", "Elif", "Farah", "Gustav", "Hana", "Ivan", "Jonas",
    "Keiko", "Liam", "Maya", "Nikhil", "Olga", "Pablo", "Quinn", "Rosa", "Samir", "Tessa",
    "Umar", "Vera", "Wen", "Ximena", "Yusuf", "Zoe", "Amara", "Bruno", "Carmen", "Dmitri",
    "Esme", "Felix", "Greta", "Hugo", "Ines", "Jamal", "Kira", "Lorenzo", "Mina", "Noah",
    "Oscar", "Priya", "Rafael", "Sofia", "Tomas", "Uma", "Viktor", "Willa", "Yara", "Zane",
    "Aiko", "Bianca", "Cyrus", "Daphne", "Emil", "Fatima", "Gael", "Helga", "Idris", "Julia",
    "Kofi", "Leila", "Marco", "Nadia", "Omar", "Petra", "Ravi", "Selin", "Theo", "Ulla",
]

LAST_NAMES = [
    "Berg", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad", "Ivanova", "Jensen",
    "Kowalski", "Lindqvist", "Moreau", "Nakamura", "Okafor", "Petrov", "Quispe", "Rossi",
    "Santos", "Tanaka", "Usman", "Varga", "Weber", "Xu", "Yilmaz", "Zhang", "Abbott", "Brandt",
    "Castillo", "Delgado", "Evans", "Ferreira", "Gomez", "Holm", "Iqbal", "Jovanovic", "Kim",
    "Lopez", "Mendes", "Novak", "Ortiz", "Park", "Reyes", "Schmidt", "Torres", "Urban", "Vidal",
]

CITIES = [
    "Lisbon", "Oslo", "Porto", "Lyon", "Krakow", "Valencia", "Ghent", "Bergen", "Turin", "Leeds",
    "Utrecht", "Malmo", "Graz", "Brno", "Bilbao", "Aarhus", "Seville", "Tampere", "Basel", "Cork",
]

STREETS = [
    "Harbour Road", "Maple Street", "Station Lane", "Mill Avenue", "Rose Court", "Canal Walk",
    "Hill Terrace", "Market Square", "Orchard Way", "Bridge Street", "Linden Row", "Quay Street",
]

EMAIL_DOMAINS = ["mail.test", "post.test", "inbox.test", "letters.test"]

# Calendar: titles that take a person ("Lunch with Anna") and titles that stand alone.
EVENT_WITH_PERSON = ["Lunch with {name}", "Coffee with {name}", "Call with {name}", "1:1 with {name}",
                     "Dinner with {name}", "Run with {name}", "Study session with {name}"]
EVENT_ALONE = ["Dentist appointment", "Team standup", "Yoga class", "Budget review", "Haircut",
               "Piano lesson", "Car service", "Project kickoff", "Book club", "Parent-teacher meeting",
               "Physio session", "Flight check-in", "Quarterly planning", "Vet appointment",
               "Language class", "Design review", "Tax advisor meeting", "Climbing session"]
EVENT_PLACES = ["Room 4B", "Main office", "City clinic", "Community hall", "Cafe Lumen", "Online",
                "Studio 2", "North gym", "Library annex", "Riverside park"]

REMINDER_TEXTS = ["pay the electricity bill", "water the plants", "call the landlord", "renew the passport",
                  "book a dentist check-up", "pick up the dry cleaning", "buy a birthday card",
                  "return the library books", "back up the laptop", "order printer ink",
                  "submit the expense report", "take out the recycling", "charge the bike lights",
                  "send the rent transfer", "check the tyre pressure", "defrost the freezer"]

NOTE_TITLES = ["Packing list", "Gift ideas", "Recipe: lentil soup", "Meeting notes", "Books to read",
               "Wifi passwords", "Garden plan", "Weekend ideas", "Workout routine", "Shopping list",
               "Travel plan", "Podcast picks", "Home repairs", "Budget 2026"]
NOTE_BODIES = ["passport, charger, sunglasses", "scarf for mum, puzzle for Leo", "lentils, carrots, cumin, stock",
               "ship the beta on Friday; hire a designer", "The Overstory; Piranesi; Dune",
               "guest network: sunflower42", "tomatoes by the fence, herbs in pots",
               "museum, flea market, lake walk", "squats 3x10, plank 3x45s", "oat milk, eggs, rice",
               "train at 8, hotel near the station", "two history shows and one on science",
               "fix the shelf, replace the kitchen tap", "rent, savings, holidays"]

MESSAGE_BODIES = ["Are we still on for {activity} at {time}?", "Running a bit late, see you at {time}.",
                  "Can you send me the photos from {activity}?", "Thanks for {activity} yesterday!",
                  "Don't forget {activity} on {day}.", "I booked {activity} for {day}, hope that works.",
                  "Call me when you're free.", "Happy birthday! Hope you have a great day.",
                  "The keys are under the mat.", "Did you see the news about the {activity}?"]
ACTIVITIES = ["dinner", "the hike", "the concert", "the football match", "brunch", "the museum trip",
              "the board game night", "the cinema", "the swim", "the market"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]

# Products: a made-up brand (two syllables) + an item from a category with a price range in cents.
BRAND_SYLLABLES = ["zel", "vo", "kar", "lum", "tri", "nex", "ora", "bel", "qua", "sen", "mo", "dri",
                   "pax", "ely", "ron", "tes", "vik", "ami", "sol", "fen"]
PRODUCT_CATEGORIES = {
    "headphones": (["wireless earbuds", "over-ear headphones", "sport earphones"], 1900, 19900),
    "chargers": (["USB-C charger", "wireless charging pad", "car charger"], 900, 5900),
    "cables": (["USB-C cable", "HDMI cable", "Lightning cable"], 500, 2500),
    "coffee": (["espresso beans", "filter coffee", "decaf beans"], 600, 2400),
    "tea": (["green tea", "chamomile tea", "black tea"], 300, 1500),
    "snacks": (["trail mix", "dark chocolate bar", "rice crackers"], 200, 900),
    "stationery": (["dotted notebook", "gel pens", "sticky notes"], 300, 2200),
    "home": (["scented candle", "desk lamp", "plant pot"], 800, 6900),
    "fitness": (["yoga mat", "resistance bands", "water bottle"], 900, 4900),
    "phone accessories": (["phone case", "screen protector", "phone stand"], 700, 3500),
    "batteries": (["AA batteries", "AAA batteries", "power bank"], 400, 4500),
    "personal care": (["shampoo", "toothpaste", "hand cream"], 250, 1800),
}
PRODUCT_ADJECTIVES = ["compact", "classic", "eco", "pro", "mini", "premium", "everyday", "travel"]

CARD_BRANDS = ["Visa", "Mastercard", "Amex"]
CARRIERS = ["PostNord", "DHL", "UPS", "Royal Mail", "GLS"]

VENUE_KINDS = {
    "restaurant": (["The {adj} {noun}", "{noun} & {noun2}", "Casa {noun}"], 2, 12),
    "salon": (["{adj} Cuts", "Studio {noun}"], 1, 2),
    "clinic": (["{adj} Health Clinic", "{noun} Medical"], 1, 1),
    "climbing gym": (["{noun} Boulders", "The {adj} Wall"], 1, 4),
}
VENUE_ADJECTIVES = ["Copper", "Blue", "Golden", "Quiet", "Little", "Green", "Silver", "Red", "Old",
                    "Happy", "Wild", "Bright"]
VENUE_NOUNS = ["Fig", "Lantern", "Anchor", "Olive", "Sparrow", "Oak", "Harbour", "Lemon", "Fox",
               "Pepper", "Willow", "Comet"]

APP_CATALOGUE = {
    "Maps": "navigation", "Camera": "photo", "Photos": "photo", "Spotify": "music", "Podcasts": "music",
    "WhatsApp": "social", "Signal": "social", "Instagram": "social", "Duolingo": "education",
    "Kindle": "books", "Strava": "fitness", "Headspace": "health", "Uber": "travel", "Trainline": "travel",
    "Banking": "finance", "Notes Plus": "productivity", "Slack": "productivity", "Zoom": "productivity",
    "Weather": "utilities", "Calculator": "utilities", "Netflix": "video", "YouTube": "video",
    "Chess": "games", "Sudoku": "games", "Recipes": "food", "Deliveroo": "food",
}

ALARM_LABELS = ["Gym", "Work", "Meds", "Wake up", "School run", "Yoga", "Flight", "Laundry"]
TIMER_LABELS = ["Pasta", "Tea", "Eggs", "Laundry", "Pizza", "Rice", "Workout", "Bread"]
