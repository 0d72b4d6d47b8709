"""One module per node. A node holds properties and sockets and returns its spec; it never solves."""

from .bake import CLASSES as _BAKE
from .configuration import CLASSES as _CONFIGURATION
from .ik_target import CLASSES as _IK_TARGET
from .link_switch import CLASSES as _LINK_SWITCH
from .robot import CLASSES as _ROBOT
from .solver import CLASSES as _SOLVER
from .swivel import CLASSES as _SWIVEL

CLASSES = (*_ROBOT, *_IK_TARGET, *_LINK_SWITCH, *_SOLVER, *_SWIVEL, *_CONFIGURATION, *_BAKE)
