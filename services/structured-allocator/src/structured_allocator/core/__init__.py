"""The allocation core: pure functions and data, no I/O (see :mod:`.allocator` for the contract)."""

from .allocator import Allocator
from .cel_env import CelCache, CelCompileError, CelRuntimeError
from .explain import Explanation, RequestExplanation
from .pools import Pool, gather_pools
from .precheck import DeviceErrorCheck, device_errors_possible
from .quantity import Quantity, parse_quantity
from .semver import Version, parse_semver
from .sliceindex import SliceIndex
from .types import (
    MAX_RESULTS_PER_CLAIM,
    AllocatedState,
    AllocationError,
    AllocationOutcome,
    CelSelectorError,
    DeviceID,
    Features,
    InvalidCapacityError,
    InvalidRequestError,
    PoolUnavailableError,
    SearchBudget,
    SearchBudgetExhausted,
    TooManyResultsError,
    UnknownDeviceClassError,
)

__all__ = [
    "MAX_RESULTS_PER_CLAIM",
    "AllocatedState",
    "AllocationError",
    "AllocationOutcome",
    "Allocator",
    "CelCache",
    "CelCompileError",
    "CelRuntimeError",
    "CelSelectorError",
    "DeviceErrorCheck",
    "DeviceID",
    "Explanation",
    "Features",
    "InvalidCapacityError",
    "InvalidRequestError",
    "Pool",
    "PoolUnavailableError",
    "Quantity",
    "RequestExplanation",
    "SearchBudget",
    "SearchBudgetExhausted",
    "SliceIndex",
    "TooManyResultsError",
    "UnknownDeviceClassError",
    "Version",
    "device_errors_possible",
    "gather_pools",
    "parse_quantity",
    "parse_semver",
]
