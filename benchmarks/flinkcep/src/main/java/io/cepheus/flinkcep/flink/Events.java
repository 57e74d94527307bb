package io.cepheus.flinkcep.flink;

import io.cepheus.flinkcep.event.Event;
import io.cepheus.flinkcep.event.SubEvent;
import io.cepheus.flinkcep.model.EventSpec;

import org.apache.flink.api.common.serialization.SerializerConfigImpl;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;

import java.util.ArrayList;
import java.util.List;

/** Case events as Java objects and stream records. */
public final class Events {
    private Events() {}

    public static List<Event> fromSpecs(List<EventSpec> specs) {
        List<Event> out = new ArrayList<>(specs.size());
        for (EventSpec s : specs) {
            switch (s.type()) {
                case "Event":
                    out.add(new Event(s.seq(), s.id(), s.name(), s.price(), s.ts()));
                    break;
                case "SubEvent":
                    if (s.volume() == null) {
                        throw new IllegalArgumentException("SubEvent seq " + s.seq() + " has no volume");
                    }
                    out.add(new SubEvent(s.seq(), s.id(), s.name(), s.price(), s.ts(), s.volume()));
                    break;
                default:
                    throw new IllegalArgumentException("unknown event type: " + s.type());
            }
        }
        return out;
    }

    /** The record as the Java tests build it; ts null means a record without timestamp. */
    public static StreamRecord<Event> record(Event e) {
        return e.ts == null ? new StreamRecord<>(e) : new StreamRecord<>(e, e.ts);
    }

    /**
     * Flink's serializer for Event (a PojoSerializer that also handles SubEvent), as the
     * operator's and the SharedBuffer's state would use.
     */
    public static TypeSerializer<Event> serializer() {
        return TypeInformation.of(Event.class).createSerializer(new SerializerConfigImpl());
    }
}
