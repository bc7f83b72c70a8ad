"""The interface audit: which speculative algorithm builds which worker, what each role's uses
require of a model class, what the class lacks, and the delegation that fixes it.
"""
