"""Starting and supervising workers: how a dataflow-building function comes to run somewhere.

``execute`` (:mod:`.execute`) looks a backend up in the registry (:mod:`.backends`) with the run
defaults of :mod:`.defaults`; the backends run workers in this process (:mod:`.inline`), in OS
processes (:mod:`.processes`, :mod:`.launcher`) or in Ray actors (:mod:`.ray_actors`, with
:mod:`.ray_start` and its watchdog :mod:`.ray_watchdog` for a Ray that timelypy starts itself);
the backends that run workers elsewhere share one supervisor (:mod:`.supervise`), and the user's
functions travel to them through :mod:`.shipping`. Nothing here knows about driver sessions.
"""
