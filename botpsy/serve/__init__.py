"""``botpsy serve``: botpsy's runtime behind the OpenAI chat-completions API, with a web chat page.

``protocol`` checks requests and shapes responses, ``engine`` queues requests fairly on the one
model, ``turns`` runs model-mode turns (the runtime's loop guard, thinking budget, prefix
cache and constrained calls on every request), ``assistant`` runs the agent over the device
(``--db``), ``responses`` writes streamed chunks or whole responses, ``app`` holds the routes,
``command`` the flags; the page is in ``web/``.
"""
