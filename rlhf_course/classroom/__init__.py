"""The classroom: the course on a JupyterHub, as `make hub` runs it on one machine (``python -m rlhf_course.classroom``).

``hub`` makes the classroom (its folders, the course copy, every Jupyter and nbgrader config) and runs the hub;
``accounts`` the Unix accounts; ``server_env`` the Python environment every account runs; ``spawner`` and
``auth`` are the hub's own classes (each user's server as that user, in a cgroup; the run's password table);
``private_kernels`` keeps every kernel's sockets in its user's private runtime folder; ``config`` is every student's
nbgrader configuration (the exchange, Validate's limits), which imports nothing of the launcher.
"""
