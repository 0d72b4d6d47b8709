"""One module per node. A node holds properties and sockets and returns its spec; it never solves."""

from .ik_target import CLASSES as _IK_TARGET
from .passthrough import CLASSES as _PASSTHROUGH
from .robot import CLASSES as _ROBOT
from .solver import CLASSES as _SOLVER

CLASSES = (*_ROBOT, *_IK_TARGET, *_SOLVER, *_PASSTHROUGH)
