/**
 * What a transport promises beyond the verbs' contract, the facts layers above decide on
 * instead of a transport's name: {@link io.membus.core.capability.TransportCapabilities}
 * (with {@link io.membus.core.capability.TransportCapabilities#of(String)}, what a kind of
 * transport promises before one exists) and
 * {@link io.membus.core.capability.ReplicationSupport}. Application API: the transport SPI
 * declares them, applications and launchers read them.
 */
package io.membus.core.capability;
