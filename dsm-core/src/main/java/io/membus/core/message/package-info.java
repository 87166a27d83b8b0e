/**
 * Two-sided messages beside the one-sided verbs: a node registers a
 * {@link io.membus.core.message.MessageHandler} per channel; peers
 * {@code send} (one-way) and {@code request} (a reply) on a
 * {@link io.membus.core.transport.Connection}, or by node id through
 * {@link io.membus.core.message.Messaging}. The contract is stated once in
 * {@link io.membus.core.message.Messaging}; the receiver side every transport
 * shares is {@link io.membus.core.message.MessageEndpoint}, the sender side
 * {@link io.membus.core.message.Outbox}.
 */
package io.membus.core.message;
