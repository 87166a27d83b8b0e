/**
 * Codecs turn values into the bytes stored in remote memory and back: the
 * {@code Codec<T>} SPI, Kryo codecs with registration required (remote bytes never
 * instantiate an unregistered class) and fixed-width codecs that skip Kryo.
 */
package io.membus.codec;
