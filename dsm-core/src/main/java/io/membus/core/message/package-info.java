/**
 * Two-sided messages beside the one-sided verbs, the application's side: a node registers a
 * {@link io.membus.core.message.MessageHandler} per channel; peers
 * {@code send} (one-way) and {@code request} (a reply) by node id through
 * {@link io.membus.core.message.Messaging}. The contract is stated once in
 * {@link io.membus.core.message.Messaging}. What the transports share to carry
 * messages (endpoint, inboxes, outbox, the record) is the transport SPI's
 * {@code io.membus.core.transport.message}.
 */
package io.membus.core.message;
