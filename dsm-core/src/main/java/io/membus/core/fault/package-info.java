/**
 * Fault injection a test drives on a node (delay, drop, partition per peer):
 * {@link io.membus.core.fault.FaultInjector}. Application side: every transport
 * implements it, and test code (the test kit's nemesis, {@code membus stress}) drives it
 * without naming the transport SPI.
 */
package io.membus.core.fault;
