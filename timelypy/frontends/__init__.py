"""Front-ends: languages compiled onto the plan layer (:mod:`timelypy.plan`).

Each front-end parses its language into plans and runs them through the sessions of
:mod:`timelypy.workers`; the engine never imports a front-end. :mod:`.datalog` is the first.
"""
