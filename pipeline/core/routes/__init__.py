"""Routes (pure): one decoded record -> the mutations of every route its topic feeds.

- ``reference``: the one semantics -- each route's reference (``RouteReference``) and a topic's
  (``TopicReference.outcome``): puts, deletes, counters, or a refusal with its reason, per route.
- ``router``: the compiled routes, the fast forms derived from them (the routing loops; the compiled
  loop ``_routerun.c`` with its plans) and ``Router``, which runs them and hands the reference every
  record they do not take.
- ``putgen``: a plain put route's generated fast form; ``fields``, ``encodings``: reading a field and
  a column's encoding of it.
"""
