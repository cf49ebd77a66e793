"""Redis Cluster, sans-io: the cluster bus's messages (``wire``), the node table and its
persistence (``nodes.conf``), and the state machine that gossips, detects failures, elects
replicas and answers where a slot lives. The I/O shell (``pyrepl.net``) owns the sockets; the
server core asks this package where a command's keys live (redirects)."""
