"""Progress tracking: change batches, antichains, reachability, subgraphs, the broadcaster."""

from .broadcast import Progcaster
from .change_batch import ChangeBatch
from .frontier import Antichain, MutableAntichain, antichain_join, antichain_meet
from .operate import Operate, SharedProgress
from .reachability import Location, ReachabilityBuilder, ReachabilityTracker, Source, Target
from .subgraph import Subgraph

__all__ = [
    "ChangeBatch",
    "Antichain",
    "MutableAntichain",
    "antichain_join",
    "antichain_meet",
    "Operate",
    "SharedProgress",
    "Location",
    "Source",
    "Target",
    "ReachabilityBuilder",
    "ReachabilityTracker",
    "Progcaster",
    "Subgraph",
]
