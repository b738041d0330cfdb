"""ACEBench (English) in ``botpsy eval``: function calling in everyday scenarios, scored by botpsy's
own implementation of ACEBench's published rules.

What is measured, in ACEBench's three groups and 17 sub-categories:

* **normal** (12): the model reads a conversation and makes the call(s) that come next. Atom
  items stress one kind of parameter (bool, enum, number, list, short and deep objects);
  single-turn items need one function or several in parallel; multi-turn items (user_adjust,
  user_switch) are conversations whose every turn must be right; similar_api tells near-twin
  functions apart; preference fills values from a user profile. Calls are matched against the
  gold answers (function names and counts, required and extra parameters, value rules:
  ``checker``).
* **special** (3): the model must not call a function, and must say which parameters are
  missing (incomplete), which value is wrong (error_param) or that no function fits
  (irrelevant), in ACEBench's phrases, which the prompt gives (``checker``).
* **agent** (2): the model works ACEBench's simulated phone (Wi-Fi and login, messages,
  reminders, food delivery) or airline, all of which ``platform`` and ``travel`` implement in
  memory. multi_step hands it the whole task; multi_turn has a simulated user (``--user-model``,
  else the model under test) reveal the task step by step. Scored on the end state against the
  gold state, plus ACEBench's process accuracy against the gold milestones (``agent``).

Prompting: each item's functions go to the model as OpenAI-style tools, rendered by
``run_turn`` in the model's chat format (botpsy's for botpsy models, the base's own template
for base models), with botpsy's wording of ACEBench's instructions (``data``). Calls are read
from the parsed tool calls, or from ACEBench's text form ``[f(a=1)]`` in the answer when a
model writes them there.

Summary (``ACEBenchSuite.summarize``): accuracy per sub-category (and process accuracy for the
agent and normal multi-turn ones), per group as the unweighted mean of its sub-categories, and
ACEBench's headline ``overall = 0.578 * normal + 0.2676 * special + 0.1545 * agent`` (the
weights renormalized over the groups present, when a run leaves a group out); ``table`` holds
the rows the report prints.

Items: 1,023 data lines make 900 items (a normal multi-turn conversation is one item): normal
700 (atom 6 x 50, single function 100, parallel 100, user_adjust 50 conversations of 2-3 turns
(123 turns), user_switch 50 of 2 turns (100), similar_api 50, preference 50), special 150
(3 x 50), agent 50 (multi_step 20, multi_turn 30). ``--limit N`` takes N items shared out over
the 17 sub-categories in turn (17 gives one of each) and spread evenly within each.

Runtime: a normal or special item is one generation (a multi-turn conversation 2-3), its
prompt the instructions plus 1-7 function schemas: about 0.3-2.5k tokens, 1.2k on average. An
agent item is a tool loop over 15 functions (6-7 for the airline), about 1.5k prompt tokens
before the conversation grows: the gold paths take 2-8 calls (multi_step 5.5 on average,
multi_turn 4), so a good multi_step run is about 6-7 model turns and a multi_turn run about 7
model turns plus 3-5 simulated-user turns. All 900 items: about 1,000 single generations for
normal and special and about 450 for agent, the agent ones re-reading a conversation of 2-5k
tokens (capped at 40 messages and the token budget per item). ``--limit 34`` (two per
sub-category) is about 35 single generations and 4 agent episodes (about 35 generations more).

Example::

    botpsy eval --model runs/speedrun/gguf/model-q4_k_m.gguf --suite acebench --limit 34

Data: ``botpsy/evaldata/acebench`` (or ``$BOTPSY_DATA_DIR/acebench``, ``--data-dir``), ACEBench's
English data and gold answers from chenchen0103/ACEBench, MIT licence. Evaluation only.
"""

from botpsy.eval.acebench.suite import ACEBenchSuite

__all__ = ["ACEBenchSuite"]
