/**
 * The message side of the transport SPI: what every transport shares to carry the
 * two-sided messages of {@link io.membus.core.message.Messaging}. The receiver side is
 * {@link io.membus.core.transport.message.MessageEndpoint} (handlers, executor, one
 * {@link io.membus.core.transport.message.Inbox} per sender answering through a
 * {@link io.membus.core.transport.message.Responder}), the sender side
 * {@link io.membus.core.transport.message.Outbox}, the record both move
 * {@link io.membus.core.transport.message.MessageRecord}, and a failure's wire form
 * {@link io.membus.core.transport.message.MessageFailures}; and the one layout of the
 * networked transports' connection handshake,
 * {@link io.membus.core.transport.message.HandshakeRecord}.
 *
 * <p>Transport SPI: only transports, dsm-core's own code and a node's assembly use this
 * package; applications use {@link io.membus.core.message} (ApiBoundaryTest checks it).
 */
package io.membus.core.transport.message;
