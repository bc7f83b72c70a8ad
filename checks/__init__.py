"""What is wrong and how to fix it: pure analysis of source trees, configs and logs.

Nothing in this package starts a process, touches git or NVML, or imports the code it audits.
"""
