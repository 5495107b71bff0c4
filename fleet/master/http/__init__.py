"""The master's HTTP edge: what every request meets before a route, and the wire.

The auth gate (token before body, failed-login throttle), bearer tokens and their
scopes, security headers and ``OPTIONS``, body size limits and the JSON guard, the
server protocol (slow and idle clients), the start-up token policy, and the request
and response bodies of the REST API. Nothing here imports a service or a route.
"""
