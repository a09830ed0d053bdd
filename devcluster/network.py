"""The address the node agent gives pods: this machine's own, so that Services route.

The agent runs no containers and no CNI; a pod's IP is only what the controllers copy into
a Service's endpoints. Giving every pod the machine's non-loopback address (as a
`hostNetwork` pod has) makes those endpoints real: the API server's webhook calls through
`clientConfig.service` and its service proxy reach whatever process listens on this
machine at the pod's port, so a local process can play a Deployment's pods. Loopback
cannot serve: Endpoints validation refuses 127.0.0.0/8.
"""

from __future__ import annotations

import ipaddress
import socket

#: The cluster's Service addresses, and the first of them, the `kubernetes` Service's.
SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
#: A documentation address (RFC 5737): connecting a UDP socket to it sends nothing and
#: only asks the kernel which local address its route would use.
_PROBE = ("198.51.100.1", 9)


def machine_address() -> str | None:
    """This machine's IPv4 address on its default route; None when it has only loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(_PROBE)
        except OSError:
            return None
        address = str(sock.getsockname()[0])
    ip = ipaddress.ip_address(address)
    if ip.is_loopback or ip.is_unspecified or ip.is_link_local:
        return None
    return address


class PodAddresses:
    """Hands out pod IPs: the machine's address for every pod, or, on a machine with only
    loopback, distinct addresses from 10.244.0.0/16 that route nowhere."""

    def __init__(self, shared: str | None) -> None:
        self.shared = shared
        self._next = 2

    def next(self) -> str:
        """The IP for one more pod."""
        if self.shared is not None:
            return self.shared
        n = self._next
        self._next += 1
        return f"10.244.{n // 250}.{n % 250 + 1}"
