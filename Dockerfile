# weft's container image: the static binary and nothing else. Build it with
# `make image`, which compiles bin/weft-static (CGO_ENABLED=0) on the host
# first; no base image is pulled.
#
# The one binary is the server, the agent, the built-in AM and the CLI. An
# agent runs app commands as processes inside its own container, so this
# image runs only apps whose command is the weft binary; build your agents'
# image FROM this one and add what your apps need.
FROM scratch
# Accounts for containers that run as nobody (agents never run them as root
# unless allow_root is set).
COPY deploy/passwd /etc/passwd
COPY deploy/group /etc/group
COPY bin/weft-static /weft
ENTRYPOINT ["/weft"]
CMD ["-h"]
