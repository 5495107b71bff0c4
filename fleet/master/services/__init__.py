"""The master's services: what the routes do, one module per resource or concern.

A route parses its request, calls a service and answers; the service holds the
logic (catalog lookups, config writes with generations, submits, schedules, secret
masking, validation, the event hub, metrics, the sweeper). Services never import a
route module.
"""
