"""The interface audit: what each role's uses require of a model class under the worker an
algorithm builds, what the class lacks, and the delegation that fixes it.
"""
