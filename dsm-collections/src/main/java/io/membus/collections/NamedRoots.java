package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.InvalidBlockException;
import io.membus.alloc.Placement;
import io.membus.alloc.StaleBlockReferenceException;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.Words;
import io.membus.core.directory.NameRegistry;

import java.nio.charset.StandardCharsets;
import java.util.Optional;

/**
 * Gets or creates the root of a named structure, the one mechanism every
 * collection uses to be "the same object on every node":
 * <ol>
 *   <li>look the name up; if bound, open that root (checking kind and descriptor);</li>
 *   <li>else allocate a root block placed by the name's key
 *       ({@link Placement#byKey(String)}), let the structure format its body (it may
 *       allocate more blocks), write the root's header ({@link RootDescriptor}), and
 *       only then bind the name (first binder wins, cluster-wide): a root is complete
 *       before any node can find it;</li>
 *   <li>a creator that lost the bind race discards what its initializer allocated,
 *       frees its root and opens the winner's.</li>
 * </ol>
 * A root is never freed while its name is bound: {@link #destroy} tombstones the
 * root, unbinds the name, and only then hands the root over to be freed a grace later.
 * Opening a name whose root is gone (destroyed, or its node's memory lost) is a
 * {@link StructureGoneException} that says so and how to give the name back.
 *
 * <p><b>Note:</b> thread-safe; any number of nodes and threads may get-or-create
 * the same name at once and all of them end up with the same root. The root's
 * header is written (write completed) before the bind, so by the visibility rule
 * of the verbs every node that finds the name reads a complete header.
 */
public final class NamedRoots {
    /** The longest name accepted, in characters. */
    public static final int MAX_NAME_LENGTH = 1024;

    /**
     * Formats a new root's body before the name is bound; undoes it when the bind is lost.
     *
     * <p><b>Note:</b> called by the creating thread only, once per root it creates;
     * everything {@link #format} wrote with completed verbs is visible to every node
     * that finds the name.
     */
    public interface Initializer {
        /** Writes the body of {@code root} (and allocates what the structure needs beside it). */
        void format(Root root);

        /**
         * Frees what {@link #format} allocated: called on a root that lost the bind race,
         * or whose format failed part-way (then only for what it had allocated).
         */
        default void discard(Root root) {
        }
    }

    private final RemoteMemory memory;
    private final GlobalAllocator allocator;
    private final NameRegistry names;

    public NamedRoots(RemoteMemory memory, GlobalAllocator allocator, NameRegistry names) {
        this.memory = memory;
        this.allocator = allocator;
        this.names = names;
    }

    public RemoteMemory memory() {
        return memory;
    }

    public GlobalAllocator allocator() {
        return allocator;
    }

    public NameRegistry names() {
        return names;
    }

    /**
     * The root named {@code name}, created with a body of {@code bodyLength} bytes
     * formatted by {@code initializer} when the name is free.
     *
     * @throws CollectionTypeMismatchException when the name is bound to a structure of
     *         another kind or descriptor, or to something that is not a root
     * @throws CollectionArgumentException when the name or descriptor is empty or too long
     */
    public Root getOrCreate(String name, CollectionKind kind, String descriptor, long bodyLength,
                            Initializer initializer) {
        checkName(name);
        byte[] desc = descriptor.getBytes(StandardCharsets.UTF_8);
        if (desc.length == 0 || desc.length > RootDescriptor.MAX_DESCRIPTOR_LENGTH) {
            throw new CollectionArgumentException("descriptor", descriptor,
                    "1.." + RootDescriptor.MAX_DESCRIPTOR_LENGTH + " UTF-8 bytes");
        }
        Optional<Long> bound = names.lookup(name);
        if (bound.isPresent()) {
            try {
                return open(name, bound.get(), kind, descriptor);
            } catch (StructureGoneException gone) {
                bound = latestAfterGone(name, bound.get(), gone); // this node's replica may lag an unbind
                if (bound.isPresent()) {
                    return open(name, bound.get(), kind, descriptor);
                }
            }
        }
        int bodyOffset = RootDescriptor.bodyOffset(desc.length);
        BlockRef block = allocator.allocate(bodyOffset + Math.max(8, bodyLength), Placement.byKey(name));
        Root root = new Root(name, block, kind, descriptor, bodyOffset);
        try {
            initializer.format(root);
            byte[] head = new byte[bodyOffset];
            Words.putLong(head, RootDescriptor.MAGIC_OFFSET, RootDescriptor.MAGIC);
            Words.putLong(head, RootDescriptor.BLOCK_HEADER_OFFSET, block.header());
            Words.putLong(head, RootDescriptor.CAPACITY_OFFSET, block.capacity());
            Words.putInt(head, RootDescriptor.KIND_OFFSET, kind.id());
            Words.putInt(head, RootDescriptor.DESCRIPTOR_LENGTH_OFFSET, desc.length);
            System.arraycopy(desc, 0, head, RootDescriptor.DESCRIPTOR_OFFSET, desc.length);
            allocator.write(block, 0, head);
        } catch (RuntimeException e) {
            release(root, initializer, e);
            throw e;
        }
        // a bind that fails (timeout) has an unknown outcome: the name may point at this root, so it stays allocated
        long winner = names.bind(name, block.ptr());
        if (winner == block.ptr()) {
            return root;
        }
        release(root, initializer, null);
        return open(name, winner, kind, descriptor);
    }

    /** Frees a root this node made but did not publish. */
    private void release(Root root, Initializer initializer, RuntimeException failure) {
        try {
            initializer.discard(root);
            allocator.free(root.block());
        } catch (RuntimeException e) {
            if (failure != null) {
                failure.addSuppressed(e);
            } else {
                throw e;
            }
        }
    }

    /**
     * Opens the root bound to {@code name} (no creation).
     *
     * @return the root, or empty when the name is not bound
     * @throws CollectionTypeMismatchException when the name is bound to something that is not a root
     */
    public Optional<Root> open(String name) {
        checkName(name);
        Optional<Long> bound = names.lookup(name);
        if (bound.isEmpty()) {
            return Optional.empty();
        }
        try {
            return Optional.of(open(name, bound.get(), null, null));
        } catch (StructureGoneException gone) {
            return latestAfterGone(name, bound.get(), gone).map(ptr -> open(name, ptr, null, null));
        }
    }

    /**
     * The name's binding as the registry's authoritative copy says, after the root this node
     * found for it was gone: empty when the name was given back (another node destroyed it and
     * this node's replica had not learned it yet), another pointer when it was bound anew.
     *
     * @throws StructureGoneException {@code gone}, when the name is still bound to that root
     */
    private Optional<Long> latestAfterGone(String name, long ptr, StructureGoneException gone) {
        Optional<Long> latest = names.lookupLatest(name);
        if (latest.isPresent() && latest.get() == ptr) {
            throw gone;
        }
        return latest;
    }

    private Root open(String name, long ptr, CollectionKind kind, String descriptor) {
        String requested = kind == null ? "any" : kind + " " + descriptor;
        if (ptr == RemotePtr.NULL) {
            throw new CollectionTypeMismatchException(name, "not a collection root (null pointer)", requested);
        }
        byte[] head = memory.read(ptr + 8, RootDescriptor.DESCRIPTOR_OFFSET);
        long magic = Words.getLong(head, RootDescriptor.MAGIC_OFFSET);
        if (magic == RootDescriptor.TOMBSTONE) {
            throw gone(name, ptr, "destroyed (its root is a tombstone; its blocks are freed a grace after the destroy)");
        }
        if (magic != RootDescriptor.MAGIC) {
            checkGone(name, ptr, "magic=0x" + Long.toHexString(magic));
            throw new CollectionTypeMismatchException(name, "not a collection root (at=" + RemotePtr.toString(ptr)
                    + ", magic=0x" + Long.toHexString(magic) + ")", requested);
        }
        long header = Words.getLong(head, RootDescriptor.BLOCK_HEADER_OFFSET);
        long capacity = Words.getLong(head, RootDescriptor.CAPACITY_OFFSET);
        int kindId = Words.getInt(head, RootDescriptor.KIND_OFFSET);
        int descLength = Words.getInt(head, RootDescriptor.DESCRIPTOR_LENGTH_OFFSET);
        CollectionKind existingKind = CollectionKind.byId(kindId);
        if (existingKind == null || descLength <= 0 || descLength > RootDescriptor.MAX_DESCRIPTOR_LENGTH
                || RootDescriptor.bodyOffset(descLength) > capacity) {
            throw new CollectionTypeMismatchException(name, "not a collection root (at=" + RemotePtr.toString(ptr)
                    + ", kind=" + kindId + ", descriptorLength=" + descLength + ")", requested);
        }
        BlockRef block;
        try {
            block = BlockRef.of(ptr, header, capacity);
        } catch (InvalidBlockException e) {
            throw new CollectionTypeMismatchException(name, "not a collection root (" + e.getMessage() + ")",
                    requested);
        }
        String existingDescriptor;
        try {
            existingDescriptor = new String(allocator.read(block, RootDescriptor.DESCRIPTOR_OFFSET, descLength),
                    StandardCharsets.UTF_8);
        } catch (StaleBlockReferenceException e) {
            throw gone(name, ptr, "its root block was freed (" + e.getMessage() + ")");
        }
        Root root = new Root(name, block, existingKind, existingDescriptor, RootDescriptor.bodyOffset(descLength));
        if (kind != null && (existingKind != kind || !existingDescriptor.equals(descriptor))) {
            throw new CollectionTypeMismatchException(name, root.type(), requested);
        }
        return root;
    }

    /**
     * Whether the block at {@code ptr}, which does not hold a root, is allocated at all:
     * when it is not (freed, never carved since its node's heap was formatted again) the
     * root is gone and a {@link StructureGoneException} is thrown; when it is, something
     * else lives there and the caller reports a type mismatch.
     */
    private void checkGone(String name, long ptr, String found) {
        if (memory.readLong(ptr) == 0) { // an allocated block's sealed header is never 0: zeroed (fresh) memory
            throw gone(name, ptr, "its root's memory no longer holds it (" + found + ", block header=0: the memory"
                    + " there is fresh): its node restarted without file-backed heap segments");
        }
        try {
            allocator.ref(ptr);
        } catch (io.membus.alloc.FreedBlockException | InvalidBlockException e) {
            throw gone(name, ptr, "its root's memory no longer holds it (" + found + "; " + e.getMessage()
                    + "): its node restarted without file-backed heap segments, or it was destroyed");
        }
    }

    static StructureGoneException gone(String name, long ptr, String reason) {
        return new StructureGoneException(name, ptr, reason, "its data is gone: call destroy(\"" + name
                + "\") (Membus.destroy or DsmCollections.destroy) to give the name back, then open it again to"
                + " create a new, empty structure");
    }

    /**
     * Destroys the structure bound to {@code name}, once cluster-wide:
     * <ol>
     *   <li>its root's magic word is CASed to {@link RootDescriptor#TOMBSTONE} (the one
     *       destroyer; handles that check their root from now on fail with a
     *       {@link StructureGoneException});</li>
     *   <li>the name is unbound if it is still bound to that root
     *       ({@link NameRegistry#unbind(String, long)}), so opening it again creates a new
     *       structure (first binder wins, as always);</li>
     *   <li>{@code release} is handed the root, to free its blocks a grace later.</li>
     * </ol>
     * A name whose root is gone already (a tombstone, or memory that was lost) is only
     * unbound. A name bound to something that is not a root is refused
     * ({@link CollectionTypeMismatchException}) and left alone.
     *
     * @return whether this call destroyed a structure or unbound a gone one; false when
     *         the name was not bound, or another caller destroyed it first
     */
    public boolean destroy(String name, java.util.function.Consumer<Root> release) {
        checkName(name);
        Optional<Long> bound = names.lookup(name);
        if (bound.isEmpty()) {
            return false;
        }
        return destroy(name, bound.get(), release);
    }

    /**
     * {@link #destroy(String, java.util.function.Consumer)} of the root at {@code ptr} (a
     * handle's own): the name is unbound only while it is still bound to that root, so a
     * name already bound to a new structure keeps it.
     */
    public boolean destroy(String name, long ptr, java.util.function.Consumer<Root> release) {
        checkName(name);
        Root root;
        try {
            root = open(name, ptr, null, null);
        } catch (StructureGoneException e) {
            return names.unbind(name, ptr);
        }
        long witness = memory.compareAndSwap(root.block().payload() + RootDescriptor.MAGIC_OFFSET,
                RootDescriptor.MAGIC, RootDescriptor.TOMBSTONE);
        // the name goes first: a failed unbind throws here and leaves the blocks allocated (safe; destroy again)
        names.unbind(name, ptr);
        if (witness != RootDescriptor.MAGIC) {
            return false; // another destroyer won the tombstone CAS and releases the blocks
        }
        release.accept(root);
        return true;
    }

    private static void checkName(String name) {
        if (name == null || name.isEmpty() || name.length() > MAX_NAME_LENGTH) {
            throw new CollectionArgumentException("name", name, "a non-empty string of at most "
                    + MAX_NAME_LENGTH + " characters");
        }
    }
}
