"""The sandbox wing: a fresh sandbox for each submission's student code (:mod:`sandbox`), the zygote that forks
it (:mod:`zygote`), the program inside it (:mod:`sandbox_runner`), the pipe protocol between them
(:mod:`protocol`), what a call of a student's function did as plain data (:mod:`observe`) and the system-call
filter (:mod:`seccomp`).  It imports only the course model: nothing here judges or writes a page."""
