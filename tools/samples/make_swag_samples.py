"""Writes the bundled SWAG sample (kerasbert/data/samples/swag/{train,val,test}.csv).

Every sentence is composed here from templates and word lists (no SWAG text), with a fixed
seed, in the official CSV layout of rowanz/swagaf `data/` (leading unnamed index column;
test.csv without labels). Each example is an everyday scene: a person starts an activity
(sent1), the second sentence starts with them again (sent2), and of four endings one goes on
with that activity while three come from other, unrelated activities. The signal is clear on
purpose, so a small pre-trained encoder (all-MiniLM-L6-v2) learns it in three epochs on CPU,
yet varied: 40 activities x 3 openings x 10 people x 4 continuations.

    python -m tools.samples.make_swag_samples [--out kerasbert/data/samples/swag]

The committed files must equal this script's output (tests/tasks/test_swag.py checks).
"""

import argparse
import csv
import io
import os
import random

from tools.samples import DATA_DIR

SEED = 20240611
N_TRAIN, N_VAL, N_TEST = 300, 80, 20
NUM_ENDINGS = 4
HEADER = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source"] + [
    f"ending{k}" for k in range(NUM_ENDINGS)] + ["label"]

# (subject of sent1, the word sent2 starts with, possessive)
PEOPLE = [("A man", "He", "his"), ("A woman", "She", "her"), ("A young boy", "The boy", "his"),
          ("A little girl", "The girl", "her"), ("An old man", "He", "his"),
          ("An old woman", "She", "her"), ("A teenager", "Someone", "their"),
          ("Our neighbour", "She", "her"), ("A tall man", "The man", "his"),
          ("A student", "The student", "their")]

# activity: (openings of sent1 after the subject, continuations after sent2's first word)
SCENES = {
    "baking": (
        ["pours flour into a large mixing bowl.", "cracks two eggs into a bowl of sugar.",
         "sets out butter, milk and flour on the counter."],
        ["stirs the batter with a wooden spoon.", "pours the batter into a round cake tin.",
         "slides the tray into the hot oven.", "whisks the mixture until it is smooth."]),
    "dishes": (
        ["fills the kitchen sink with hot, soapy water.", "stacks dirty plates next to the sink.",
         "puts on rubber gloves at the sink."],
        ["scrubs a greasy pan with a sponge.", "rinses each plate under the tap.",
         "sets the clean glasses on a drying rack.", "wipes the plates dry with a towel."]),
    "tea": (
        ["fills a kettle with water.", "takes a teapot down from the shelf.",
         "drops a tea bag into a mug."],
        ["pours the boiling water over the tea.", "adds a splash of milk and stirs.",
         "waits a few minutes for the tea to brew.", "sips the hot tea slowly."]),
    "painting": (
        ["opens a can of blue paint.", "tapes the edges of the bedroom window.",
         "spreads an old sheet over the floor."],
        ["rolls paint evenly across the wall.", "dips a brush into the paint.",
         "paints the corner with small, careful strokes.",
         "steps back to look at the freshly painted wall."]),
    "swimming": (
        ["dives into the swimming pool.", "pulls on goggles at the edge of the pool.",
         "climbs down the ladder into the pool."],
        ["swims a lap of front crawl.", "kicks hard toward the far end of the pool.",
         "floats on their back in the water.", "takes a deep breath and swims underwater."]),
    "guitar": (
        ["sits down with an acoustic guitar.", "tunes the strings of a guitar.",
         "picks up a guitar and a pick."],
        ["strums a few chords of a song.", "plays a slow melody on the guitar.",
         "presses the strings and plucks a tune.", "sings along while playing the guitar."]),
    "gardening": (
        ["kneels beside a flower bed with a trowel.", "carries a bag of soil into the garden.",
         "pulls weeds from the vegetable patch."],
        ["digs a small hole in the soil.", "plants a young tomato seedling.",
         "waters the plants with a watering can.", "presses the soil firmly around the roots."]),
    "lawn": (
        ["pushes a lawn mower out of the shed.", "starts the engine of the lawn mower.",
         "walks across the overgrown lawn with a mower."],
        ["mows the grass in long, straight rows.", "empties the grass clippings into a bin.",
         "trims the edges of the lawn.", "pushes the mower around the garden."]),
    "car_wash": (
        ["parks the car in the driveway with a bucket of water.",
         "sprays the dusty car with a hose.", "soaks a sponge in a bucket of soapy water."],
        ["scrubs the car's doors with the sponge.", "rinses the soap off the windshield.",
         "dries the hood with a soft cloth.", "washes the mud off the tyres."]),
    "tyre": (
        ["kneels beside a car with a flat tyre.", "takes a jack out of the car's boot.",
         "loosens the nuts on a flat tyre."],
        ["lifts the car with the jack.", "pulls the flat tyre off the wheel.",
         "bolts the spare tyre onto the car.", "tightens the wheel nuts with a wrench."]),
    "bicycle": (
        ["climbs onto a bicycle.", "straps on a helmet beside a bicycle.",
         "pumps air into the tyres of a bike."],
        ["pedals down the street.", "rides the bike along the park path.",
         "rings the bell and cycles around the corner.", "coasts down a gentle hill on the bike."]),
    "running": (
        ["laces up running shoes at the park gate.", "stretches before a morning jog.",
         "starts a stopwatch at the edge of the track."],
        ["jogs along the path beside the river.", "runs a lap around the track.",
         "sprints the last stretch, breathing hard.", "slows to a walk after a long run."]),
    "dog": (
        ["clips a leash onto the dog's collar.", "opens the door for an excited dog.",
         "grabs a ball and whistles for the dog."],
        ["walks the dog around the block.", "throws the ball and the dog runs after it.",
         "pats the dog on the head.", "lets the dog sniff around the park."]),
    "cat": (
        ["opens a tin of cat food.", "calls the cat into the kitchen.",
         "sits on the sofa with a sleepy cat."],
        ["spoons the food into the cat's bowl.", "strokes the cat's soft fur.",
         "watches the cat eat its dinner.", "scratches the cat gently behind the ears."]),
    "haircut": (
        ["drapes a cape over a customer in the barber's chair.", "picks up scissors and a comb.",
         "wets the customer's hair with a spray bottle."],
        ["trims the hair around the ears.", "cuts a little off the top.",
         "combs the hair and snips the ends.", "shows the customer the haircut in a mirror."]),
    "shaving": (
        ["spreads shaving foam on their cheeks.",
         "leans toward the bathroom mirror with a razor.", "rinses a razor under the tap."],
        ["shaves along the jaw with slow strokes.", "rinses the foam off their face.",
         "pats the smooth skin dry with a towel.", "shaves carefully under the chin."]),
    "teeth": (
        ["squeezes toothpaste onto a toothbrush.", "fills a cup with water at the bathroom sink.",
         "stands at the sink with a toothbrush."],
        ["brushes their teeth for two minutes.", "spits the toothpaste into the sink.",
         "rinses their mouth with water.", "scrubs the back teeth with the brush."]),
    "laundry": (
        ["carries a basket of dirty clothes to the washing machine.",
         "sorts the laundry into whites and colours.", "pours detergent into the washing machine."],
        ["loads the clothes into the machine.", "starts the wash and closes the lid.",
         "hangs the wet shirts on the line.", "folds the dry towels into a neat pile."]),
    "ironing": (
        ["sets up an ironing board in the bedroom.", "plugs in the iron.",
         "lays a wrinkled shirt on the ironing board."],
        ["irons the collar of the shirt.", "presses the sleeves flat with the iron.",
         "hangs the ironed shirt on a hanger.", "smooths out the creases with the hot iron."]),
    "reading": (
        ["takes a book from the shelf.", "settles into an armchair with a novel.",
         "opens a thick book at the bookmark."],
        ["reads the first page quietly.", "turns the page and keeps reading.",
         "smiles at a line in the book.", "marks the page and closes the book."]),
    "letter": (
        ["sits down at the desk with a pen and paper.", "takes out a sheet of writing paper.",
         "opens a drawer and finds an envelope."],
        ["writes a letter to an old friend.", "signs the letter and folds it.",
         "seals the letter in the envelope.", "sticks a stamp on the envelope."]),
    "shopping": (
        ["pushes a trolley into the supermarket.", "picks up a basket at the shop door.",
         "checks a shopping list in the supermarket."],
        ["puts apples and bread into the trolley.", "compares the prices of two cereals.",
         "pays for the groceries at the checkout.", "bags the shopping and walks to the car."]),
    "skiing": (
        ["clicks into a pair of skis at the top of the slope.",
         "rides the chairlift up the snowy mountain.",
         "adjusts ski goggles at the top of the run."],
        ["skis down the slope in wide turns.", "pushes off with the poles and glides downhill.",
         "carves through the fresh snow.", "stops at the bottom of the run in a spray of snow."]),
    "snowman": (
        ["rolls a ball of snow across the yard.", "pats fresh snow into a big pile.",
         "pulls on mittens and steps out into the snow."],
        ["stacks a smaller snowball on top.", "gives the snowman a carrot nose.",
         "wraps a scarf around the snowman's neck.",
         "presses two pebbles in for the snowman's eyes."]),
    "fishing": (
        ["casts a fishing line into the lake.", "baits a hook at the end of the pier.",
         "sits on the riverbank with a fishing rod."],
        ["waits for a bite on the line.", "reels in a small, wriggling fish.",
         "pulls the fish gently off the hook.", "casts the line out again."]),
    "camping": (
        ["unpacks a tent at the campsite.", "pushes tent pegs into the ground.",
         "carries a bundle of firewood to the camp."],
        ["raises the tent and ties the ropes.", "lights a small campfire.",
         "rolls out a sleeping bag in the tent.", "roasts marshmallows over the fire."]),
    "soccer": (
        ["places a football on the penalty spot.", "jogs onto the pitch with a football.",
         "dribbles a ball toward the goal."],
        ["kicks the ball into the net.", "passes the ball to a teammate.",
         "shoots and the goalkeeper dives.", "celebrates the goal with the team."]),
    "basketball": (
        ["bounces a basketball on the court.", "catches a pass near the hoop.",
         "dribbles the ball down the court."],
        ["shoots the ball through the hoop.", "jumps and dunks the basketball.",
         "passes the ball to a player under the basket.",
         "takes a shot from the free throw line."]),
    "tennis": (
        ["tosses a tennis ball into the air.",
         "bounces a ball at the baseline of the tennis court.",
         "grips a tennis racket at the net."],
        ["serves the ball over the net.", "hits a forehand back across the court.",
         "returns the ball with a backhand.", "wins the point with a volley at the net."]),
    "piano": (
        ["sits down at the piano.", "opens the lid of the piano.",
         "places sheet music on the piano."],
        ["plays a gentle tune on the keys.", "presses the pedal and plays a chord.",
         "practises scales up and down the keyboard.",
         "finishes the piece and lifts their hands."]),
    "photo": (
        ["raises a camera toward the sunset.", "sets up a tripod on the beach.",
         "asks a family to stand together for a photo."],
        ["presses the shutter and takes a picture.", "zooms in and focuses the lens.",
         "checks the photo on the camera's screen.", "takes another shot from a lower angle."]),
    "gift": (
        ["spreads wrapping paper on the table.", "cuts a sheet of shiny wrapping paper.",
         "sets a small box on a roll of gift paper."],
        ["wraps the paper around the box.", "tapes the edges of the paper down.",
         "ties a ribbon around the gift.", "sticks a name tag on the present."]),
    "cleaning_window": (
        ["sprays glass cleaner on the window.", "climbs a step ladder next to a dusty window.",
         "fills a bucket to wash the windows."],
        ["wipes the glass with a cloth.", "polishes the window until it shines.",
         "squeegees the water off the pane.", "cleans the window frame with a rag."]),
    "vacuum": (
        ["plugs in the vacuum cleaner.", "moves the chairs away from the rug.",
         "pulls the vacuum cleaner out of the cupboard."],
        ["vacuums the carpet in the living room.", "pushes the vacuum under the sofa.",
         "empties the dust from the vacuum cleaner.", "cleans the stairs with the vacuum."]),
    "bed": (
        ["pulls the sheets off the bed.", "shakes out a clean sheet over the mattress.",
         "pulls a fresh pillowcase from the cupboard."],
        ["tucks the sheet under the mattress.", "puts the clean pillowcase on the pillow.",
         "spreads the duvet over the bed.", "fluffs the pillows and smooths the covers."]),
    "pizza": (
        ["rolls out pizza dough on the counter.", "spreads tomato sauce over a pizza base.",
         "grates a block of cheese over the dough."],
        ["scatters cheese and olives over the pizza.", "slides the pizza into the oven.",
         "slices the hot pizza into eight pieces.", "lifts a slice of pizza, cheese stretching."]),
    "salad": (
        ["rinses lettuce under the tap.", "sets a chopping board and a knife on the table.",
         "puts tomatoes and a cucumber on the board."],
        ["chops the cucumber into thin slices.", "tosses the salad in a large bowl.",
         "drizzles olive oil over the salad.", "cuts the tomatoes into quarters."]),
    "climbing": (
        ["chalks their hands at the foot of the climbing wall.", "clips a rope to their harness.",
         "grabs the first hold on the climbing wall."],
        ["climbs up the wall, hold by hold.", "reaches for a hold high above.",
         "pulls up onto a ledge near the top.", "rappels slowly back down the wall."]),
    "boat": (
        ["pushes a canoe into the water.", "climbs into a rowing boat at the dock.",
         "picks up a paddle on the shore."],
        ["paddles across the calm lake.", "rows the boat toward the island.",
         "steers the canoe around a rock.", "ties the boat to the dock."]),
    "kite": (
        ["unrolls a kite on the windy hill.", "holds a kite above their head on the beach.",
         "runs across the field with a kite string."],
        ["lets the wind lift the kite into the sky.", "pulls the string as the kite climbs.",
         "flies the kite high above the field.", "reels the kite back down."]),
}


def make_example(rng, scene):
    """(sent1, sent2, endings, label, scene) for one scene; 3 distractors from 3 other scenes."""
    openings, continuations = SCENES[scene]
    subject, sent2, pos = rng.choice(PEOPLE)
    sent1 = f"{subject} {rng.choice(openings).replace('their', pos)}"
    others = rng.sample([s for s in SCENES if s != scene], NUM_ENDINGS - 1)
    gold = rng.choice(continuations)
    distractors = [rng.choice(SCENES[s][1]) for s in others]
    label = rng.randrange(NUM_ENDINGS)
    endings = distractors[:label] + [gold] + distractors[label:]
    endings = [e.replace("their", pos) for e in endings]
    return sent1, sent2, endings, label, scene


def make_split(rng, n, seen):
    """n examples with contexts not seen before (across splits), scenes drawn round-robin."""
    scenes, rows = sorted(SCENES), []
    while len(rows) < n:
        scene = scenes[len(rows) % len(scenes)]
        for _ in range(1000):
            row = make_example(rng, scene)
            if row[0] not in seen:
                break
        else:
            raise RuntimeError("word lists too small for the requested sample size")
        seen.add(row[0])
        rows.append(row)
    rng.shuffle(rows)
    return rows


def to_csv(rows, rng, labelled):
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")  # quotes fields with commas, like pandas
    writer.writerow(HEADER if labelled else HEADER[:-1])
    for index, (sent1, sent2, endings, label, scene) in enumerate(rows):
        video_id = f"sample_{scene}-{rng.randrange(10000):04d}"
        fold_ind = rng.randrange(1000, 30000)
        row = [index, video_id, fold_ind, f"{sent1} {sent2}", sent1, sent2, "gold", *endings]
        writer.writerow(row + [label] if labelled else row)
    return buffer.getvalue()


def generate():
    """{file name: CSV text} of the sample."""
    rng = random.Random(SEED)
    seen, out = set(), {}
    for name, n, labelled in [("train.csv", N_TRAIN, True), ("val.csv", N_VAL, True),
                              ("test.csv", N_TEST, False)]:
        out[name] = to_csv(make_split(rng, n, seen), rng, labelled)
    return out


def write_all(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for name, text in generate().items():
        with open(os.path.join(out_dir, name), "w", encoding="utf-8", newline="") as f:
            f.write(text)


def main(argv=None):
    default = os.path.join(DATA_DIR, "samples", "swag")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=default, help="output folder (default: %(default)s)")
    write_all(parser.parse_args(argv).out)


if __name__ == "__main__":
    main()
