package io.membus.collections;

import io.membus.alloc.GlobalAllocator;
import io.membus.codec.Codec;
import io.membus.codec.Codecs;
import io.membus.coherence.CoherentHeap;
import io.membus.coherence.RemoteRef;
import io.membus.core.RemoteMemory;
import io.membus.core.directory.NameRegistry;

import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

/**
 * The collections entry point of one node: gets or creates a named structure
 * that is the same object on every node ({@code atomicLong("hits")} on node 1 and
 * on node 3 count the same word). Creating one name concurrently from many nodes
 * yields one structure ({@link NamedRoots}); asking for a name with another type
 * than it was created with (kind, codec, length, capacity) is a
 * {@link CollectionTypeMismatchException} naming both types.
 *
 * <p>Handles are cached per name in this object: asking twice returns the same
 * handle (and one {@link DsmLock} per name per node, which its reentrancy needs).
 * Use one {@code DsmCollections} per node (the {@code io.membus.Membus} facade
 * holds it).
 *
 * <p>Life cycle: {@link #destroy(String)} (or a handle's {@code destroy()}) destroys a
 * structure cluster-wide and gives its name back; handles on it then fail with a
 * {@link StructureGoneException}, and so does opening a name whose root is gone (its
 * node's memory lost), until {@code destroy(name)} gives the name back. Sizes: map
 * entries and queue elements are limited by {@link #maxValueSize(long)}.
 *
 * <p><b>Note:</b> thread-safe; creation follows {@link NamedRoots}. A handle is
 * safe to share between threads.
 */
public final class DsmCollections {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(DsmCollections.class);
    private final NamedRoots roots;
    private final WordVerbs words;
    private final WakeUps wakeUps;
    private final ConcurrentHashMap<String, Object> open = new ConcurrentHashMap<>();

    private final CoherentHeap heap;
    private final Lifecycle lifecycle;

    /** The setting that holds the largest value a structure accepts. */
    public static final String MAX_VALUE_SIZE_SETTING = "membus.collections.max-value-size";
    /** Default of {@value #MAX_VALUE_SIZE_SETTING}: 8 MiB. */
    public static final long DEFAULT_MAX_VALUE_SIZE = 8L << 20;
    /**
     * The highest {@value #MAX_VALUE_SIZE_SETTING} accepted: a map entry or a queue element
     * is written with one verb, which carries at most 16 MiB; 4 KiB are kept for the
     * entry's own header words.
     */
    public static final long MAX_VALUE_SIZE_LIMIT = (16L << 20) - 4096;

    /** Largest encoded map entry (key + value) and queue element handles opened from now on accept. */
    private volatile long maxValueSize = DEFAULT_MAX_VALUE_SIZE;

    public DsmCollections(RemoteMemory memory, GlobalAllocator allocator, NameRegistry names) {
        this(memory, allocator, names, null);
    }

    /**
     * With this node's {@link CoherentHeap} (may be null): maps get it in their options,
     * so maps with leased reads ({@link DsmMapOptions#leasedReads}) can be created and
     * opened here.
     */
    public DsmCollections(RemoteMemory memory, GlobalAllocator allocator, NameRegistry names, CoherentHeap heap) {
        this.roots = new NamedRoots(memory, allocator, names);
        this.lifecycle = new Lifecycle(roots, heap);
        this.words = new WordVerbs(memory);
        this.wakeUps = WakeUps.of(memory);
        this.heap = heap;
    }

    /**
     * Sets {@value #MAX_VALUE_SIZE_SETTING}: the largest map entry (encoded key and value
     * together) and queue element (encoded) that handles opened by this object from now
     * on accept, in bytes. A larger one is refused with a
     * {@link io.membus.core.error.ValueTooLargeException} naming the size, the limit and
     * the setting, before anything is allocated. The {@code io.membus.Membus} facade sets
     * it from its config before opening any handle. Returns this.
     *
     * @throws io.membus.core.error.DsmConfigException when {@code bytes} is not in 1 .. {@link #MAX_VALUE_SIZE_LIMIT}
     */
    public DsmCollections maxValueSize(long bytes) {
        checkMaxValueSize(bytes, MAX_VALUE_SIZE_SETTING);
        this.maxValueSize = bytes;
        return this;
    }

    /** The current {@value #MAX_VALUE_SIZE_SETTING}, in bytes. */
    public long maxValueSize() {
        return maxValueSize;
    }

    static void checkMaxValueSize(long bytes, String key) {
        if (bytes < 1 || bytes > MAX_VALUE_SIZE_LIMIT) {
            throw new io.membus.core.error.DsmConfigException(key, String.valueOf(bytes),
                    "1 .. " + MAX_VALUE_SIZE_LIMIT + " bytes (one verb carries a value)");
        }
    }

    /**
     * Destroys the structure named {@code name}, whatever its kind, cluster-wide, and
     * gives the name back: opening it again (on any node) creates a new, empty structure
     * (first creator wins, as always). Every handle on the destroyed structure, on every
     * node, fails from then on with a {@link StructureGoneException} (within a quarter
     * second of the destroy; a handle cached here is dropped, so asking this object for
     * the name again opens the new one). Its blocks are freed {@link #destroyGrace()}
     * later, when no operation of a handle can still reach them.
     *
     * <p>A name whose root is gone already (destroyed, or its node's memory lost: the
     * {@link StructureGoneException} opening it throws says so) is only unbound: how such
     * a name is given back. Destroying a name that is not bound returns false.
     *
     * @return whether this call destroyed the structure or gave a gone one's name back;
     *         false when the name is not bound or another caller destroyed it first
     * @throws CollectionTypeMismatchException when the name is bound to something that is not a root (left alone)
     */
    public boolean destroy(String name) {
        Object cachedHandle = open.get(name);
        boolean done = lifecycle.destroy(name);
        if (cachedHandle != null) {
            Lifecycle.Life life = ((Rooted) cachedHandle).life();
            if (life == null || life.lookNow()) { // a look at its root now: it fails from here on
                open.remove(name, cachedHandle);
            }
        }
        return done;
    }

    /**
     * Closes this node's collections (the facade's {@code Membus.close()} calls it): every
     * handle opened here fails from now on, at once, with a
     * {@link io.membus.core.error.DsmClosedException} naming its structure (e.g.
     * {@code DsmMap 'orders'}), before any verb; a handle on a structure destroyed before
     * keeps failing with its {@link StructureGoneException}. Idempotent.
     */
    public void close() {
        lifecycle.close();
    }

    /** How long a destroyed structure's blocks stay allocated after the destroy (default 30 s). */
    public java.time.Duration destroyGrace() {
        return lifecycle.grace();
    }

    /**
     * Sets {@link #destroyGrace()}: it must exceed {@code membus.operation-timeout} plus a
     * quarter second (see {@link Lifecycle}); 10 ms .. 1 h. Handles check their root every
     * quarter grace, at most every 250 ms. Returns this.
     */
    public DsmCollections destroyGrace(java.time.Duration grace) {
        if (grace == null || grace.toMillis() < 10 || grace.toHours() >= 1) {
            throw new io.membus.core.error.DsmConfigException("destroyGrace", String.valueOf(grace), "10 ms .. 1 h");
        }
        lifecycle.grace(grace);
        return this;
    }

    /** Destroys armed and not yet freed (tests wait for 0). */
    int pendingReleases() {
        return lifecycle.pendingReleases();
    }

    /** The root mechanism, for structures built outside this class (the map). */
    public NamedRoots roots() {
        return roots;
    }

    public RemoteMemory memory() {
        return roots.memory();
    }

    public GlobalAllocator allocator() {
        return roots.allocator();
    }

    /** The counter named {@code name}, created at zero when absent. */
    public DsmAtomicLong atomicLong(String name) {
        return cached(name, DsmAtomicLong.class, CollectionKind.ATOMIC_LONG + " " + DsmAtomicLong.DESCRIPTOR,
                () -> DsmAtomicLong.getOrCreate(roots, words, name));
    }

    /**
     * The array of {@code length} longs named {@code name}, created zeroed when absent,
     * in stripes of {@value StripedWords#DEFAULT_STRIPE_LENGTH} elements.
     *
     * @throws CollectionTypeMismatchException when the name holds another type or another length
     */
    public DsmLongArray longArray(String name, int length) {
        return longArray(name, length, StripedWords.DEFAULT_STRIPE_LENGTH);
    }

    /** As {@link #longArray(String, int)} with {@code stripeLength} elements per stripe when it creates the array. */
    public DsmLongArray longArray(String name, int length, int stripeLength) {
        return cached(name, DsmLongArray.class, CollectionKind.LONG_ARRAY + " " + DsmLongArray.descriptor(length),
                () -> DsmLongArray.getOrCreate(roots, words, name, length, stripeLength));
    }

    /** The array of {@code length} doubles named {@code name}, created at +0.0 when absent. */
    public DsmDoubleArray doubleArray(String name, int length) {
        return doubleArray(name, length, StripedWords.DEFAULT_STRIPE_LENGTH);
    }

    /** As {@link #doubleArray(String, int)} with {@code stripeLength} elements per stripe when it creates the array. */
    public DsmDoubleArray doubleArray(String name, int length, int stripeLength) {
        return cached(name, DsmDoubleArray.class,
                CollectionKind.DOUBLE_ARRAY + " " + DsmDoubleArray.descriptor(length),
                () -> DsmDoubleArray.getOrCreate(roots, words, name, length, stripeLength));
    }

    /** The lock named {@code name}, created free when absent; one handle per name on this node. */
    public DsmLock lock(String name) {
        return cached(name, DsmLock.class, CollectionKind.LOCK + " " + DsmLock.DESCRIPTOR,
                () -> DsmLock.getOrCreate(roots, wakeUps, name));
    }

    /**
     * The bounded queue named {@code name} of {@code capacity} elements encoded with
     * {@code codec}, created empty when absent, with slots of
     * {@value QueueDescriptor#DEFAULT_SLOT_BYTES} bytes (elements up to 256 encoded
     * bytes inline) when this call creates it, the stored slot size otherwise.
     *
     * @throws CollectionTypeMismatchException when the name holds another type, capacity or codec
     */
    public <E> DsmQueue<E> queue(String name, Codec<E> codec, int capacity) {
        return queue(name, codec, QueueOptions.capacity(capacity));
    }

    /**
     * As {@link #queue(String, Codec, int)} with {@code slotBytes} per slot.
     *
     * @throws QueueSlotSizeMismatchException when the queue exists with another slot size
     */
    public <E> DsmQueue<E> queue(String name, Codec<E> codec, int capacity, int slotBytes) {
        return queue(name, codec, QueueOptions.capacity(capacity).slotBytes(slotBytes));
    }

    /**
     * The bounded queue named {@code name} with {@code options} (capacity, slot size; see
     * {@link QueueOptions}), created empty when absent.
     *
     * @throws CollectionTypeMismatchException when the name holds another type, capacity or codec
     * @throws QueueSlotSizeMismatchException  when the options name a slot size and the queue exists with another
     */
    @SuppressWarnings("unchecked")
    public <E> DsmQueue<E> queue(String name, Codec<E> codec, QueueOptions options) {
        java.util.Objects.requireNonNull(options, "options");
        int capacity = options.capacity();
        int requested = options.slotBytes();
        DsmQueue<E> q = cached(name, DsmQueue.class, CollectionKind.QUEUE + " " + DsmQueue.descriptor(capacity, codec),
                () -> createQueue(name, codec, capacity, requested).limitElements(maxValueSize,
                        MAX_VALUE_SIZE_SETTING));
        if (requested != 0 && q.slotBytes() != requested) { // a handle cached here, or a queue created by another node
            throw new QueueSlotSizeMismatchException(name, q.slotBytes(), requested);
        }
        return q;
    }

    /**
     * The queue with {@code requested} bytes per slot, or (0) the default: then a ring the
     * heap cannot hold with the default slots (larger than its largest object, or no room
     * left for it) gets the largest slots that fit (for a ring above the largest object,
     * {@link GlobalAllocator#largestObject()}: computed; for a full heap: halved until it
     * fits), a multiple of 8 and at least {@link QueueDescriptor#MIN_SLOT_BYTES}, and says
     * so at INFO; elements larger than its
     * slot go to a block of their own, as always. A slot size the caller named is kept or
     * refused.
     */
    private <E> DsmQueue<E> createQueue(String name, Codec<E> codec, int capacity, int requested) {
        if (requested != 0) {
            return DsmQueue.getOrCreate(roots, wakeUps, name, codec, capacity, requested);
        }
        int slot = QueueDescriptor.DEFAULT_SLOT_BYTES;
        long largest = roots.allocator().largestObject();
        int descriptor = DsmQueue.descriptor(capacity, codec).getBytes(java.nio.charset.StandardCharsets.UTF_8).length;
        if (RootDescriptor.bodyOffset(descriptor) + Math.max(8, QueueDescriptor.bodyLength(capacity, slot)) > largest) {
            // room per slot: the largest object less the root's header (at most a descriptor's worth) and states;
            // when not even the smallest slots fit, the default ring is tried and refused (AllocationSizeException)
            long room = (largest - RootDescriptor.bodyOffset(RootDescriptor.MAX_DESCRIPTOR_LENGTH)
                    - QueueDescriptor.dataOffset(capacity)) / capacity;
            int fits = (int) Math.min(slot - 8L, room) & ~7;
            slot = fits < QueueDescriptor.MIN_SLOT_BYTES ? slot : fits;
        }
        while (true) {
            try {
                DsmQueue<E> q = DsmQueue.getOrCreate(roots, wakeUps, name, codec, capacity, slot);
                if (slot != QueueDescriptor.DEFAULT_SLOT_BYTES && q.slotBytes() == slot) {
                    LOG.info("queue '{}': {} slots of the default {} bytes did not fit the heap; made with {}-byte"
                            + " slots (elements above {} bytes take a block of their own; QueueOptions.slotBytes"
                            + " chooses)", name, capacity, QueueDescriptor.DEFAULT_SLOT_BYTES, slot,
                            slot - QueueDescriptor.PAYLOAD_FIELD);
                }
                return q;
            } catch (io.membus.alloc.OutOfRemoteMemoryException full) {
                if (slot == QueueDescriptor.MIN_SLOT_BYTES) {
                    throw full;
                }
                slot = Math.max(QueueDescriptor.MIN_SLOT_BYTES, (slot / 2) & ~7);
            }
        }
    }

    /** {@link #queue(String, Codec, int)} with {@link Codecs#of(Class, Class[])} for {@code type}. */
    public <E> DsmQueue<E> queue(String name, Class<E> type, int capacity) {
        return queue(name, Codecs.of(type), capacity);
    }

    /** {@link #queue(String, Codec, QueueOptions)} with {@link Codecs#of(Class, Class[])} for {@code type}. */
    public <E> DsmQueue<E> queue(String name, Class<E> type, QueueOptions options) {
        return queue(name, Codecs.of(type), options);
    }

    /**
     * The {@link DsmMap} named {@code name} with keys and values encoded by
     * {@code Codecs.of(type)}, created empty when absent.
     *
     * @throws CollectionTypeMismatchException when the name holds another kind or other key/value codecs
     */
    public <K, V> DsmMap<K, V> map(String name, Class<K> keyType, Class<V> valueType) {
        return map(name, Codecs.of(keyType), Codecs.of(valueType));
    }

    /** The map named {@code name} with these codecs (and {@link DsmMapOptions#defaults()} when it creates it). */
    public <K, V> DsmMap<K, V> map(String name, Codec<K> keyCodec, Codec<V> valueCodec) {
        return map(name, keyCodec, valueCodec, DsmMapOptions.defaults());
    }

    /**
     * The map named {@code name}; {@code options} size its first table and grace when
     * this call creates it, and this node's read cache.
     */
    @SuppressWarnings("unchecked")
    public <K, V> DsmMap<K, V> map(String name, Codec<K> keyCodec, Codec<V> valueCodec, DsmMapOptions options) {
        return cached(name, DsmMap.class, CollectionKind.MAP + " " + MapOpener.descriptor(keyCodec, valueCodec),
                () -> limited(MapOpener.getOrCreate(roots, name, keyCodec, valueCodec,
                        options.coherentHeap() == null && heap != null ? options.coherentHeap(heap) : options)));
    }

    private <K, V> DsmMap<K, V> limited(DsmMap<K, V> map) {
        map.limitEntries(maxValueSize, MAX_VALUE_SIZE_SETTING);
        return map;
    }

    /** The descriptor a named coherent object's root records: its codec. */
    static String refDescriptor(Codec<?> codec) {
        return "ref(codec=" + codec.id() + ")";
    }

    /**
     * The coherent object named {@code name} ({@link RemoteRef}: cached reads under
     * leases, linearizable; see {@link CoherentHeap}), created holding
     * {@code initial.get()} when the name is free (one creator wins cluster-wide; the
     * others' values are not used). The object is placed by the name's key, like a
     * collection's root. The returned handle is a fresh {@link RemoteRef} each call (one
     * lookup and two reads); keep it. {@link #destroy(String)} frees the object at once:
     * every handle on it then fails with {@link io.membus.alloc.UseAfterFreeException}.
     *
     * @throws CollectionTypeMismatchException when the name holds another type or codec
     * @throws CollectionArgumentException when this object was built without a coherent heap
     */
    public <T> RemoteRef<T> ref(String name, Codec<T> codec, Supplier<T> initial) {
        CoherentHeap h = requireHeap();
        java.util.Objects.requireNonNull(codec, "codec");
        java.util.Objects.requireNonNull(initial, "initial");
        Root root = roots.getOrCreate(name, CollectionKind.REF, refDescriptor(codec), 16, new NamedRoots.Initializer() {
            private RemoteRef<T> made;

            @Override
            public void format(Root r) {
                made = h.create(codec, initial.get(), io.membus.alloc.Placement.byKey(name));
                byte[] words = new byte[16];
                io.membus.core.Words.putLong(words, 0, made.ptr());
                io.membus.core.Words.putLong(words, 8, made.generationHeader());
                roots.memory().write(r.bodyPtr(), words);
            }

            @Override
            public void discard(Root r) {
                if (made != null) {
                    made.free();
                }
            }
        });
        return openRef(h, root, codec);
    }

    /**
     * The coherent object named {@code name}, which must exist (see
     * {@link #ref(String, Codec, Supplier)}).
     *
     * @throws CollectionArgumentException when the name is not bound
     * @throws CollectionTypeMismatchException when the name holds another type or codec
     * @throws StructureGoneException when it was destroyed or its memory lost
     */
    public <T> RemoteRef<T> ref(String name, Codec<T> codec) {
        CoherentHeap h = requireHeap();
        Root root = roots.open(name).orElseThrow(() -> new CollectionArgumentException("name", name,
                "the name of a coherent object: create it with ref(name, codec, initial)"));
        String requested = CollectionKind.REF + " " + refDescriptor(codec);
        if (!root.type().equals(requested)) {
            throw new CollectionTypeMismatchException(name, root.type(), requested);
        }
        return openRef(h, root, codec);
    }

    private <T> RemoteRef<T> openRef(CoherentHeap h, Root root, Codec<T> codec) {
        byte[] words = roots.memory().read(root.bodyPtr(), 16);
        try {
            return h.open(io.membus.core.Words.getLong(words, 0), io.membus.core.Words.getLong(words, 8), codec);
        } catch (io.membus.alloc.StaleBlockReferenceException e) {
            throw NamedRoots.gone(root.name(), root.block().ptr(), "its coherent object was freed (" + e.getMessage()
                    + ")");
        }
    }

    private CoherentHeap requireHeap() {
        if (heap == null) {
            throw new CollectionArgumentException("heap", "null", "DsmCollections built with this node's CoherentHeap"
                    + " (io.membus.Membus passes it) for named coherent objects");
        }
        return heap;
    }

    /**
     * The handle cached for {@code name}, opened by {@code opener} the first time.
     * Opening runs outside the cache's lock (it makes round trips); two threads that
     * open at once get the same handle (the first cached wins).
     */
    private <T> T cached(String name, Class<T> type, String requested, Supplier<T> opener) {
        Object handle = open.get(name);
        // the cache holds Rooted handles only
        if (handle != null && gone((Rooted) handle)) {
            open.remove(name, handle); // destroyed (here or elsewhere): the name may be bound to a new structure
            handle = null;
        }
        if (handle == null) {
            T fresh = opener.get();
            ((Rooted) fresh).life(lifecycle.life(((Rooted) fresh).root()));
            handle = open.putIfAbsent(name, fresh);
            if (handle == null) {
                return fresh;
            }
        }
        if (!type.isInstance(handle)) {
            throw new CollectionTypeMismatchException(name, describe(handle), requested);
        }
        T typed = type.cast(handle);
        String existing = describe(typed);
        if (!existing.equals(requested)) {
            throw new CollectionTypeMismatchException(name, existing, requested);
        }
        return typed;
    }

    /** Whether the handle's structure is known to be destroyed (reads its root at most every check interval). */
    private static boolean gone(Rooted handle) {
        Lifecycle.Life life = handle.life();
        if (life == null) {
            return false;
        }
        try {
            life.check();
            return false;
        } catch (StructureGoneException e) {
            return true;
        }
    }

    private static String describe(Object handle) {
        return ((Rooted) handle).root().type();
    }
}
