"""Every tuning constant of the packing techniques, in one place (``placer.engine.packing``).

Limits that keep a technique's tables and searches within memory and time, and the rates that turn
a deterministic budget into work. Costs per row or step were measured on the 2-core reference
machine (see docs/bench/packing.md); changing one changes answers under ``--deterministic``.
"""

from __future__ import annotations

# Bin completion (``completion``): the node-by-node search and its lookup tables.
COMPLETION_MAX_PODS = 400  # the search recurses once per pod and node: keep far below Python's stack limit
COMPLETION_CHECK_EVERY = 16  # search ticks between two looks at the clock (a tick can take a few ms on 200 pods)
COMPLETION_FIRST_TICKS = 2000  # the first attempt's limit of ticks; each restart doubles it
COMPLETION_MAX_ATTEMPTS = 64
COMPLETION_TABLE_ROWS = 500_000  # most subsets in one lookup table of a completion
COMPLETION_ROWS_PER_TICK = 100  # table rows built or read that cost about as much as one search tick
# Steps one core takes in about a second on the reference machine (2 cores): a step is about
# 0.1 ms of drawing fills or covering, or ``_TICKS_PER_STEP`` ticks of the node-by-node search.
# With ``solver.deterministic`` the search is bounded by steps, never by the clock: a budget of u
# CP-SAT units is u / DETERMINISTIC_UNITS_PER_SECOND seconds' worth (``placer.engine.packing``).
STEPS_PER_SECOND = 10_000
# The node-by-node search ticks once per completion tried or table row batch (``_Search._tick``):
# 73,000-158,000 ticks a second on the benchmark's small-pod instances of 60-200 pods.
TICKS_PER_STEP = 10
SAMPLING_ROUNDS = 16  # at most; each round's pool is smaller, so larger sizes become affordable
TAIL_STEPS = 20_000  # cover steps for the last pods of a drawn packing
TAIL_HALF = 6  # their exact sets are listed up to twice this many pods ...
TAIL_ROWS = 700_000  # ... as far as the tables of half a set stay this small

# Exact covers (``exactcover``): listing exact fills and covering the pods with them.
COVER_MOST_PER_NODE = 6  # largest exact set listed (two halves of at most three pods)
COVER_ROWS = 2_000_000  # most subsets of one size kept in a table
COVER_SETS = 200_000  # most exact sets listed
COVER_RARE_MOST = 40  # most sets of the rarer sizes that a cover decides first, one by one
# A cover is asked of CP-SAT (one worker) on this share of its time and steps first, Algorithm X
# on the rest: the 249-pod triplets' covers (600-700 exact triples) take CP-SAT 0.1-0.3 s and
# Algorithm X over 4 minutes on the 2-core benchmark machine.
COVER_SOLVER_SHARE = 0.5
# Listing fills of 5 and 6 pods costs about this much per row of the 3-pod table (1.3 M rows at
# 200 pods: 0.9 s for 5, 2.1 s for 6, on the 2-core benchmark machine); a listing that cannot
# finish before the deadline is not started, since building a table cannot be interrupted.
COVER_SECONDS_PER_ROW = 1e-6

# Drawn fills (``fillsampler``).
DRAW_GRID_BITS = 1 << 21  # most amounts one table tracks (bits per position): 1,000 x 2,000 for a pair
DRAW_TAIL = 28  # pods left at which the rest goes to the exact cover (listing its sets stays cheap)
DRAW_BRANCH = 3  # fills tried per node before the search backs up
DRAW_DRAWS = 20  # draws per node at most (they stop once _BRANCH distinct fills are found)
DRAW_JOIN = 0.3  # probability that a pod joins the node where both choices can still end exactly
DRAW_NODES_PER_ATTEMPT = 300  # nodes a depth-first attempt may open before a restart
# What costs about one search step (0.1 ms on the 2-core benchmark machine; a deterministic budget
# counts steps, never the clock): pods looked at in draws, table bits built, rows of the last pods'
# tables.
DRAW_ITEMS_PER_STEP = 25
DRAW_BITS_PER_STEP = 1_000_000
DRAW_ROWS_PER_STEP = 300

# Sampled large fills (``largefills``).
LARGE_LARGEST = 12  # halves of up to six pods: three plus three
LARGE_ROWS = 6_000_000  # most rows of the two half lists of a trial
LARGE_FOUND = 20_000  # more candidate fills than this: fills are not rare here (the caller searches otherwise)
# A trial cannot be interrupted: it is not started unless its rows (tables and half lists) can be
# built before the deadline at about this cost each (0.5 s for 4 M rows on the 2-core benchmark
# machine).
LARGE_SECONDS_PER_ROW = 1.5e-7

# Ejection search (``ejection``): a tabu tenure keeps an ejected pod off its node for
# EJECT_TABU + [0, EJECT_TABU_SPREAD) steps; a pod just put on a node stays EJECT_KEEP steps.
EJECT_TABU = 5
EJECT_TABU_SPREAD = 10
EJECT_KEEP = 2
# Steps without fewer pods left out after which the search starts again from its start (a
# restart doubles it: search times of such instances are heavy-tailed).
EJECT_RESTART = 500
EJECT_CHECK_EVERY = 16  # steps between two looks at the clock (a step takes well under a millisecond)
# The compiled search (``kernel``): each step, every pod left out gains this share of its base
# weight (what it costs to eject it again), and it looks at the clock every EJECT_SLICE seconds
# (its first slice EJECT_FIRST_STEPS steps: a step takes 2-100 microseconds on 40-250 pods, a few
# milliseconds with hundreds left out). A race shorter than EJECT_PRIME_SECONDS does not start
# compiling it (loading it from the cache takes about 0.3 s of the interpreter's lock: a short race
# would lose more than it gains); the controller compiles it at start-up.
EJECT_WEIGHT_GAIN = 0.01
EJECT_SLICE = 0.02
EJECT_FIRST_STEPS = 4
EJECT_PRIME_SECONDS = 2.0

# The overload search (``overload``, ``overloadsteps``): at a local minimum the weight of each
# resource some node is over in grows by OVERLOAD_BUMP (every weight starts at 1).
OVERLOAD_BUMP = 1.0
# Steps without fewer nodes over their room after which it starts again from its start, weights
# reset (a restart doubles it).
OVERLOAD_RESTART = 200_000

# The LP dive (``dive``, ``contents``): it runs only where the maximal contents of a node number at
# most DIVE_CONTENTS (their listing holds about 6 entries each: 48 MB at this size, listed in well
# under a second on the corpus). One dive per threshold: each round fixes the contents whose LP value is above
# it, largest first, as far as they share no pod (and the largest at least); lower thresholds fix
# more at once (fewer LP solves), higher ones follow the LP more closely. On the corpus's hardest
# misses each threshold packs instances the others do not (docs/bench/techniques.md).
DIVE_CONTENTS = 1_000_000
# The listing gives up after going through this many sets of pods that fit one node (each once),
# about a second on the reference machine: where pods are small, few of them are maximal.
DIVE_VISITS = 3_000_000
DIVE_THRESHOLDS = (0.6, 0.9, 0.999)
# After one dive per threshold, the dives go on (thresholds in turn) with each content's cost drawn
# in [1, 1 + DIVE_NOISE): the LP's optima are many, and other ties lead other dives elsewhere.
DIVE_NOISE = 0.01
# Contents that join the LP at most per pricing round (the most negative reduced costs first).
DIVE_PRICED = 1_000

# Repacking (``repack``): neighbourhoods of REPACK_NODES nodes to start with (within
# [REPACK_NODES_MIN, REPACK_NODES_MAX] as they adapt), with at most REPACK_OUT left-out pods each,
# each question (one pod more, or an exchange) given one CP-SAT worker for at most REPACK_SECONDS.
# The race's Python side takes turns: the ejection search for REPACK_AFTER of REPACK_CYCLE seconds,
# repacking the rest, each from the other's answer.
REPACK_NODES = 6
REPACK_NODES_MIN = 3
REPACK_NODES_MAX = 12
REPACK_OUT = 12
REPACK_SECONDS = 0.1
REPACK_AFTER = 0.6
REPACK_CYCLE = 2.0

WATCH_EVERY = 0.01  # seconds between two looks at a race's stop event during a CP-SAT solve (``clock``)

# The dispatcher (``dispatch``): budgets of the techniques on a tight batch.
# The CP-SAT feasibility search "every placeable pod placed" may use this share of the budget left
# (the placed level's maximisation keeps the rest when it finds nothing): when it succeeds the
# placed level is optimal, and a plain packing model needs most of the limit on hard instances.
PLACE_ALL_SHARE = 0.85
# Bin completion races the CP-SAT search (a Python thread beside CP-SAT's workers) for at most this
# share of the budget left; CP-SAT then keeps every core. Under ``--deterministic`` the two run one
# after the other, completion first with this share as search steps.
COMPLETION_RACE_SHARE = 0.5
WIDE_PAIRS = 60_000  # most (pod group, node) pairs a tight batch on identical nodes is widened to
# Techniques switched off (names from ``dispatch.TECHNIQUES``). Empty in placer; the benchmark that
# measures what each technique contributes (benchmarks/techniques.py) switches one off at a time.
OFF: frozenset[str] = frozenset()
