"""dchlab.traces"""
