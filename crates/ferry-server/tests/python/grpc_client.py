"""A client in another language: Python with the official grpcio package, stubs generated
from ferry.v1 at run time. Publishes, consumes over the credit-based stream, acks, and
checks the server's own account of it.

Usage: grpc_client.py HOST:PORT PROTO_DIR
"""

import os
import queue
import sys
import tempfile

import grpc
from grpc_tools import protoc


def generate(proto_dir, out):
    status = protoc.main([
        "grpc_tools.protoc",
        f"-I{proto_dir}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        os.path.join(proto_dir, "ferry", "v1", "ferry.proto"),
    ])
    if status != 0:
        sys.exit(f"protoc failed with {status}")
    sys.path.insert(0, out)


def main():
    address, proto_dir = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as out:
        generate(proto_dir, out)
        from ferry.v1 import ferry_pb2 as pb, ferry_pb2_grpc as rpc

        channel = grpc.insecure_channel(address)
        admin = rpc.AdminStub(channel)
        publisher = rpc.PublisherStub(channel)
        consumer = rpc.ConsumerStub(channel)

        admin.CreateQueue(pb.CreateQueueRequest(
            name="py-orders",
            spec=pb.QueueSpec(retry=pb.RetryPolicy(max_deliveries=3)),
        ))
        sent = [f"order-{i}".encode() for i in range(10)]
        reply = publisher.Publish(pb.PublishRequest(
            queue="py-orders",
            messages=[pb.OutgoingMessage(payload=p, headers={"lang": "python"}) for p in sent],
        ))
        assert len(reply.ids) == 10, reply

        try:
            publisher.Publish(pb.PublishRequest(queue="missing", messages=[pb.OutgoingMessage(payload=b"x")]))
            sys.exit("publishing to a missing queue succeeded")
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.NOT_FOUND, error

        requests = queue.Queue()
        requests.put(pb.ConsumeRequest(open=pb.ConsumeOpen(queue="py-orders", consumer="py")))
        requests.put(pb.ConsumeRequest(credit=4))

        def feed():
            while True:
                item = requests.get()
                if item is None:
                    return
                yield item

        got, settled = [], 0
        responses = consumer.Consume(feed())
        for response in responses:
            kind = response.WhichOneof("kind")
            if kind == "delivery":
                d = response.delivery
                assert d.headers["lang"] == "python"
                got.append(d.payload)
                requests.put(pb.ConsumeRequest(settle=pb.Settle(seq=d.seq, token=d.token, ack=True)))
            elif kind == "settled":
                assert response.settled.ok, response.settled.error
                settled += 1
                requests.put(pb.ConsumeRequest(credit=1))
                if settled == len(sent):
                    break
        requests.put(None)
        responses.cancel()
        assert sorted(got) == sorted(sent), got

        info = admin.DescribeQueue(pb.DescribeQueueRequest(name="py-orders"))
        assert info.stats.acked == 10 and info.stats.ready == 0, info.stats
        print("python client: published, consumed and acked 10 messages")


if __name__ == "__main__":
    main()
