"""dchlab.workloads"""
