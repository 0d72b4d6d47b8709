"""One module per node. A node holds properties and sockets and returns its spec; it never solves."""

CLASSES = ()
