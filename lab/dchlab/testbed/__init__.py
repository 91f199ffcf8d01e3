"""dchlab.testbed"""
