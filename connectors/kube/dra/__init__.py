"""Dynamic Resource Allocation: ResourceSlices, DeviceClasses, ResourceClaims and
DeviceTaintRules read into the node and pod models, so DRA clusters are counted like the
device plugin's."""
