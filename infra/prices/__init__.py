"""What AWS charges, as data: the bundled GPU price snapshot, the other unit prices, one node's
hourly price, and a Capacity Block quote. Below config validation, the cost model and the AWS
commands alike, which all read prices (the cost model itself is infra/cost/)."""
