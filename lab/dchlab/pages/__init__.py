"""dchlab.pages"""
