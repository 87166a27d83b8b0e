/**
 * Fault injection a test drives on a node (delay, drop, partition per peer):
 * {@link io.membus.core.fault.FaultInjector}. Application side: every transport holds
 * one and consults it on its verbs and messages, and test code (the test kit's nemesis,
 * {@code membus stress} through {@code DsmNode.faults()}) drives it without naming the
 * transport SPI.
 */
package io.membus.core.fault;
