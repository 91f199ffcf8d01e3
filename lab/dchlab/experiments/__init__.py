"""dchlab.experiments"""
