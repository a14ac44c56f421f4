package lab.tiered;

import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.server.log.remote.storage.LogSegmentData;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Comparator;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;

/**
 * The Kafka lab's tiered storage (KIP-405): a {@link RemoteStorageManager} that keeps each uploaded segment in a
 * folder of a local directory, as Kafka's test-only {@code LocalTieredStorage} does (which Maven Central does not
 * serve for every tested version). Compiled per Kafka version against its {@code kafka-storage-api} (the interface is
 * the same in 3.9.x and 4.x) and put on the brokers' classpath by {@code tests/lab/cluster.py} ({@code tiered=True}).
 *
 * <p>Configuration ({@code rsm.config.} prefix on the broker): {@code dir}, the "remote" directory every broker of
 * the cluster shares. Layout: {@code <dir>/<topic>-<partition>-<topicId>/<startOffset>-<endOffset>-<segmentId>/} with
 * {@code segment.log}, {@code offset.index}, {@code time.index}, {@code txn.index} (when the segment has one),
 * {@code producer.snapshot}, {@code leader-epoch-checkpoint} and {@code metadata.properties} (what the broker said of
 * the segment). A segment is written into a temporary folder renamed whole, so that a reader never sees half of it.
 */
public final class LabRemoteStorage implements RemoteStorageManager {
    public static final String DIR = "dir";
    private Path root;

    @Override
    public void configure(Map<String, ?> configs) {
        Object dir = configs.get(DIR);
        if (dir == null) throw new IllegalArgumentException("LabRemoteStorage needs rsm.config." + DIR);
        root = Paths.get(dir.toString());
        try {
            Files.createDirectories(root);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private Path partitionDir(RemoteLogSegmentMetadata md) {
        TopicIdPartition tip = md.remoteLogSegmentId().topicIdPartition();
        return root.resolve(tip.topic() + "-" + tip.partition() + "-" + tip.topicId());
    }

    private Path segmentDir(RemoteLogSegmentMetadata md) {
        return partitionDir(md).resolve(md.startOffset() + "-" + md.endOffset() + "-" + md.remoteLogSegmentId().id());
    }

    @Override
    public Optional<RemoteLogSegmentMetadata.CustomMetadata> copyLogSegmentData(
            RemoteLogSegmentMetadata md, LogSegmentData data) throws RemoteStorageException {
        Path target = segmentDir(md);
        Path tmp = target.resolveSibling("." + target.getFileName() + ".partial");
        try {
            Files.createDirectories(tmp);
            Files.copy(data.logSegment(), tmp.resolve("segment.log"), StandardCopyOption.REPLACE_EXISTING);
            Files.copy(data.offsetIndex(), tmp.resolve("offset.index"), StandardCopyOption.REPLACE_EXISTING);
            Files.copy(data.timeIndex(), tmp.resolve("time.index"), StandardCopyOption.REPLACE_EXISTING);
            if (data.transactionIndex().isPresent())
                Files.copy(data.transactionIndex().get(), tmp.resolve("txn.index"), StandardCopyOption.REPLACE_EXISTING);
            Files.copy(data.producerSnapshotIndex(), tmp.resolve("producer.snapshot"), StandardCopyOption.REPLACE_EXISTING);
            ByteBuffer epochs = data.leaderEpochIndex().duplicate();
            byte[] bytes = new byte[epochs.remaining()];
            epochs.get(bytes);
            Files.write(tmp.resolve("leader-epoch-checkpoint"), bytes);
            StringBuilder meta = new StringBuilder();
            meta.append("segment_id=").append(md.remoteLogSegmentId().id()).append('\n');
            meta.append("topic_id=").append(md.remoteLogSegmentId().topicIdPartition().topicId()).append('\n');
            meta.append("start_offset=").append(md.startOffset()).append('\n');
            meta.append("end_offset=").append(md.endOffset()).append('\n');
            meta.append("broker_id=").append(md.brokerId()).append('\n');
            meta.append("segment_leader_epochs=").append(md.segmentLeaderEpochs()).append('\n');
            Files.write(tmp.resolve("metadata.properties"), meta.toString().getBytes(StandardCharsets.UTF_8));
            deleteTree(target);
            Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            deleteQuietly(tmp);
            throw new RemoteStorageException("copy of " + md.remoteLogSegmentId() + " failed", e);
        }
        return Optional.empty();
    }

    private Path file(RemoteLogSegmentMetadata md, String name) throws RemoteResourceNotFoundException {
        Path p = segmentDir(md).resolve(name);
        if (!Files.isRegularFile(p))
            throw new RemoteResourceNotFoundException("no " + name + " for " + md.remoteLogSegmentId() + " at " + p);
        return p;
    }

    @Override
    public InputStream fetchLogSegment(RemoteLogSegmentMetadata md, int startPosition) throws RemoteStorageException {
        return range(file(md, "segment.log"), startPosition, Integer.MAX_VALUE);
    }

    @Override
    public InputStream fetchLogSegment(RemoteLogSegmentMetadata md, int startPosition, int endPosition)
            throws RemoteStorageException {
        return range(file(md, "segment.log"), startPosition, endPosition);
    }

    /** Bytes [start, end] (end inclusive, as the interface says) of a file, or to its end. */
    private static InputStream range(Path p, int start, int end) throws RemoteStorageException {
        if (start < 0 || end < start) throw new IllegalArgumentException("positions " + start + ".." + end);
        try {
            FileChannel ch = FileChannel.open(p, StandardOpenOption.READ);
            long size = ch.size();
            long last = Math.min((long) end, size - 1);
            long n = Math.max(0, last - start + 1);
            ch.position(start);
            InputStream in = Channels.newInputStream(ch);
            return new InputStream() {
                long left = n;

                @Override
                public int read() throws IOException {
                    if (left <= 0) return -1;
                    int b = in.read();
                    if (b >= 0) left--;
                    return b;
                }

                @Override
                public int read(byte[] buf, int off, int len) throws IOException {
                    if (left <= 0) return -1;
                    int got = in.read(buf, off, (int) Math.min(len, left));
                    if (got > 0) left -= got;
                    return got;
                }

                @Override
                public void close() throws IOException {
                    in.close();
                }
            };
        } catch (NoSuchFileException e) {
            throw new RemoteResourceNotFoundException("gone: " + p, e);
        } catch (IOException e) {
            throw new RemoteStorageException("cannot read " + p, e);
        }
    }

    @Override
    public InputStream fetchIndex(RemoteLogSegmentMetadata md, IndexType type) throws RemoteStorageException {
        String name;
        switch (type) {
            case OFFSET: name = "offset.index"; break;
            case TIMESTAMP: name = "time.index"; break;
            case PRODUCER_SNAPSHOT: name = "producer.snapshot"; break;
            case TRANSACTION: name = "txn.index"; break;
            case LEADER_EPOCH: name = "leader-epoch-checkpoint"; break;
            default: throw new IllegalArgumentException("index type " + type);
        }
        try {
            return new ByteArrayInputStream(Files.readAllBytes(file(md, name)));
        } catch (NoSuchFileException e) {
            throw new RemoteResourceNotFoundException("gone: " + name + " of " + md.remoteLogSegmentId(), e);
        } catch (IOException e) {
            throw new RemoteStorageException("cannot read " + name + " of " + md.remoteLogSegmentId(), e);
        }
    }

    @Override
    public void deleteLogSegmentData(RemoteLogSegmentMetadata md) throws RemoteStorageException {
        try {
            deleteTree(segmentDir(md));
        } catch (IOException e) {
            throw new RemoteStorageException("delete of " + md.remoteLogSegmentId() + " failed", e);
        }
    }

    private static void deleteTree(Path p) throws IOException {
        if (!Files.exists(p)) return;
        try (Stream<Path> s = Files.walk(p)) {
            for (Path x : (Iterable<Path>) s.sorted(Comparator.reverseOrder())::iterator) Files.deleteIfExists(x);
        }
    }

    private static void deleteQuietly(Path p) {
        try {
            deleteTree(p);
        } catch (IOException ignored) {
        }
    }

    @Override
    public void close() {
    }
}
