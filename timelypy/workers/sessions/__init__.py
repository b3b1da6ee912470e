"""The driver's session to running workers: a long-lived dataflow driven from the caller.

``open_session`` (:mod:`.session`) buffers and checks updates (:mod:`.batch`), and reaches the
workers through a client (:mod:`.client`): workers of this process are stepped by the driver
(:mod:`.inprocess`); workers elsewhere run the command loop of :mod:`.serving`, meet the driver
through :mod:`.rendezvous` and are driven by :mod:`.remote`. What a dataflow hands the session
(inputs, probes, captures, arrangements) is told apart by the protocols of :mod:`.handles`.
Sessions start their workers through the launch wing's backend registry.
"""
