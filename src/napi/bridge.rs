//! `startBrokerBridge` (being written).
