"""This machine, as the pod reaches it: ``guard`` (nsenter into PID 1's mount namespace and the safety guard
that keeps tests and demos off the real host), ``sentinel`` (does this node need a reboot?), ``reboot``
(the reboot methods: a host command, a signal to PID 1, the Zincati hand-off) and ``boot`` (when this machine
booted, for the Node conditions that appeared since).
"""
