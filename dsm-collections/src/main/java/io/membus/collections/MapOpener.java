package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapLayout;
import io.membus.alloc.Placement;
import io.membus.codec.Codec;

import java.util.Objects;

import static io.membus.collections.MapLayout.ROOT_LENGTH;

/**
 * Creating and opening {@link DsmMap}s: a map of its own ({@link DsmMap#create}), one
 * reached by its root pointer ({@link DsmMap#open}), or one by name (one map cluster-wide
 * under a name, whoever creates it first). Each ends in {@link DsmMap#openAt}, which reads
 * and checks the root; the root's layout is written by {@link MapRoot}.
 *
 * <p><b>Note:</b> stateless and thread-safe; concurrent creations by name are settled by
 * {@link NamedRoots} (one root wins, the others' formatted bodies are discarded).
 */
final class MapOpener {
    private MapOpener() {
    }

    /** {@link DsmMap#create(GlobalAllocator, Codec, Codec, DsmMapOptions)}. */
    static <K, V> DsmMap<K, V> create(GlobalAllocator heap, Codec<K> keys, Codec<V> values, DsmMapOptions options) {
        Objects.requireNonNull(heap, "heap");
        requireCodecs(keys, values, options);
        BlockRef root = heap.allocate(ROOT_LENGTH, Placement.roundRobin()); // this node may have no heap
        try {
            MapRoot.format(heap, root.payload(), keys, values, options);
        } catch (RuntimeException e) {
            heap.free(root);
            throw e;
        }
        return DsmMap.openAt(heap, root.ptr(), root.payload(), keys, values, options, null);
    }

    /** {@link DsmMap#open(GlobalAllocator, long, Codec, Codec, DsmMapOptions)}. */
    static <K, V> DsmMap<K, V> open(GlobalAllocator heap, long rootPtr, Codec<K> keys, Codec<V> values,
                                    DsmMapOptions options) {
        Objects.requireNonNull(heap, "heap");
        requireCodecs(keys, values, options);
        return DsmMap.openAt(heap, rootPtr, rootPtr + HeapLayout.BLOCK_HEADER_LENGTH, keys, values, options, null);
    }

    /** The type descriptor a named map's root records: its key and value codecs. */
    static String descriptor(Codec<?> keys, Codec<?> values) {
        return DsmMap.KIND_NAME + "(key=" + keys.id() + ",value=" + values.id() + ")";
    }

    /**
     * The map named {@code name}, created empty when the name is free (one map
     * cluster-wide, whoever creates it first); its root layout is the named root's body.
     */
    static <K, V> DsmMap<K, V> getOrCreate(NamedRoots roots, String name, Codec<K> keys, Codec<V> values,
                                           DsmMapOptions options) {
        requireCodecs(keys, values, options);
        GlobalAllocator heap = roots.allocator();
        Root root = roots.getOrCreate(name, CollectionKind.MAP, descriptor(keys, values), ROOT_LENGTH,
                new NamedRoots.Initializer() {
                    @Override
                    public void format(Root r) {
                        MapRoot.format(heap, r.bodyPtr(), keys, values, options);
                    }

                    @Override
                    public void discard(Root r) {
                        MapRoot.discard(heap, r.bodyPtr());
                    }
                });
        return DsmMap.openAt(heap, root.block().ptr(), root.bodyPtr(), keys, values, options, root);
    }

    private static void requireCodecs(Codec<?> keys, Codec<?> values, DsmMapOptions options) {
        Objects.requireNonNull(keys, "keys");
        Objects.requireNonNull(values, "values");
        Objects.requireNonNull(options, "options");
    }
}
