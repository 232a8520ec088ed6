"""The pools a plan runs over (``pool.Pool``): this process, worker processes, Ray actors.

Each is imported only by the coordinator and none imports another.
"""
